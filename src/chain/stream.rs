//! Streaming `genesis.json`: the allocation is handed out one account, and one storage slot, at
//! a time, so a genesis with tens of millions of accounts, or one contract with tens of
//! millions of slots, is read in bounded memory. Everything else in the file is kept (it is
//! small) and becomes the [`Genesis`] with an empty `alloc`. Both dialects are read as
//! [`super::ChainSpec::from_genesis_json`] reads them (`super::dialect`): each account's fields
//! as it streams by, the rest once the allocation is behind.

use std::io::Read;

use alloy_genesis::{Genesis, GenesisAccount};
use alloy_primitives::{Address, B256, Bytes, U256, keccak256};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};

use super::ChainError;
use super::dialect::{self, AccountNotes, GenesisReading};

/// What streaming a genesis file produced besides the accounts.
#[derive(Debug, Clone)]
pub struct GenesisHead {
    /// The genesis without its allocation (`alloc` is empty), in the dialect's reading.
    pub genesis: Genesis,
    /// The same, as JSON text as loupe reads it (names canonical, unknown fields dropped,
    /// forks a Besu reading implied written out): what a datadir stores.
    pub json: String,
    /// How the file was read.
    pub reading: GenesisReading,
    /// Accounts in the allocation.
    pub accounts: u64,
    /// An order-independent digest of the allocation (the wrapping sum of one keccak per
    /// account over its address, nonce, balance and code, and one per non-zero slot over its
    /// address, key and value), so that two files with the same allocation in any order and
    /// formatting compare equal without building the trie.
    pub alloc_digest: U256,
}

/// One piece of the allocation, in file order.
#[derive(Debug, Clone)]
pub enum GenesisItem {
    /// An account, its `storage` left out (its slots come as [`GenesisItem::Slot`], before or
    /// after it, as the file orders them).
    Account(Address, GenesisAccount),
    /// One storage slot of an account: key and value (left-padded to 32 bytes).
    Slot(Address, B256, B256),
}

/// Digest of one allocation item (see [`GenesisHead::alloc_digest`]); zero slots count nothing.
pub fn item_digest(item: &GenesisItem) -> U256 {
    let mut buf = Vec::with_capacity(128);
    match item {
        GenesisItem::Account(address, account) => {
            buf.extend_from_slice(address.as_slice());
            buf.extend_from_slice(&account.nonce.unwrap_or_default().to_be_bytes());
            buf.extend_from_slice(&account.balance.to_be_bytes::<32>());
            let code = account.code.as_ref().filter(|c| !c.is_empty());
            buf.extend_from_slice(code.map(keccak256).unwrap_or_default().as_slice());
        }
        GenesisItem::Slot(_, _, value) if value.is_zero() => return U256::ZERO,
        GenesisItem::Slot(address, slot, value) => {
            buf.push(b's');
            buf.extend_from_slice(address.as_slice());
            buf.extend_from_slice(slot.as_slice());
            buf.extend_from_slice(value.as_slice());
        }
    }
    U256::from_be_bytes(keccak256(&buf).0)
}

/// Reads a genesis (geth's or Besu's dialect) from `reader`, calling `on_item` for every account
/// and every storage slot of the allocation, in file order. An error from `on_item` stops the
/// read and is returned as is.
pub fn stream_genesis<R, E>(
    reader: R,
    mut on_item: impl FnMut(GenesisItem) -> Result<(), E>,
) -> Result<Result<GenesisHead, ChainError>, E>
where
    R: Read,
{
    let mut failure: Option<E> = None;
    let mut notes = AccountNotes::default();
    let mut accounts = 0u64;
    let mut digest = U256::ZERO;
    let mut de =
        serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(1 << 20, reader));
    let top = TopSeed {
        on_item: &mut |item: GenesisItem| {
            accounts += u64::from(matches!(item, GenesisItem::Account(..)));
            digest = digest.wrapping_add(item_digest(&item));
            on_item(item).map_err(|e| {
                failure = Some(e);
            })
        },
        notes: &mut notes,
    };
    let parsed = top.deserialize(&mut de).and_then(|map| de.end().map(|()| map));
    if let Some(e) = failure {
        return Err(e);
    }
    let map = match parsed {
        Ok(map) => map,
        Err(error) => return Ok(Err(ChainError::Parse { path: "<json>".into(), error })),
    };
    Ok(dialect::read(map, notes).map(|read| GenesisHead {
        genesis: read.genesis,
        json: serde_json::Value::Object(read.json).to_string(),
        reading: read.reading,
        accounts,
        alloc_digest: digest,
    }))
}

type ItemFn<'f> = dyn FnMut(GenesisItem) -> Result<(), ()> + 'f;

fn stopped<E: serde::de::Error>(_: ()) -> E {
    E::custom("stopped by the allocation's consumer")
}

struct TopSeed<'f, 'g> {
    on_item: &'f mut ItemFn<'g>,
    notes: &'f mut AccountNotes,
}

impl<'de> DeserializeSeed<'de> for TopSeed<'_, '_> {
    type Value = serde_json::Map<String, serde_json::Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_, '_> {
    type Value = serde_json::Map<String, serde_json::Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a genesis object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key.eq_ignore_ascii_case("alloc") {
                map.next_value_seed(AllocSeed {
                    on_item: &mut *self.on_item,
                    notes: &mut *self.notes,
                })?;
            } else {
                let value: serde_json::Value = map.next_value()?;
                out.insert(key, value);
            }
        }
        Ok(out)
    }
}

struct AllocSeed<'f, 'g> {
    on_item: &'f mut ItemFn<'g>,
    notes: &'f mut AccountNotes,
}

impl<'de> DeserializeSeed<'de> for AllocSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for AllocSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an alloc object of address → account")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(address) = map.next_key::<Address>()? {
            let account = map.next_value_seed(AccountSeed {
                address,
                on_item: &mut *self.on_item,
                notes: &mut *self.notes,
            })?;
            (self.on_item)(GenesisItem::Account(address, account)).map_err(stopped)?;
        }
        Ok(())
    }
}

/// One account object: its fields are parsed by alloy's `GenesisAccount` once the dialect has
/// named them (unknown ones dropped and noted), except `storage`, whose entries are handed out
/// one by one.
struct AccountSeed<'f, 'g> {
    address: Address,
    on_item: &'f mut ItemFn<'g>,
    notes: &'f mut AccountNotes,
}

impl<'de> DeserializeSeed<'de> for AccountSeed<'_, '_> {
    type Value = GenesisAccount;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<GenesisAccount, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for AccountSeed<'_, '_> {
    type Value = GenesisAccount;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an account object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GenesisAccount, A::Error> {
        let mut fields = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key.eq_ignore_ascii_case("storage") {
                map.next_value_seed(StorageSeed {
                    address: self.address,
                    on_item: &mut *self.on_item,
                })?;
            } else {
                fields.insert(key, map.next_value()?);
            }
        }
        let fields =
            dialect::account_fields(fields, self.notes).map_err(serde::de::Error::custom)?;
        serde_json::from_value(serde_json::Value::Object(fields)).map_err(serde::de::Error::custom)
    }
}

/// Left-pads a key or value of at most 32 bytes, as geth and alloy read genesis storage.
fn word<E: serde::de::Error>(bytes: &Bytes) -> Result<B256, E> {
    if bytes.len() > 32 {
        return Err(E::custom(format!("storage key or value of {} bytes", bytes.len())));
    }
    let mut out = B256::ZERO;
    out.0[32 - bytes.len()..].copy_from_slice(bytes);
    Ok(out)
}

struct StorageSeed<'f, 'g> {
    address: Address,
    on_item: &'f mut ItemFn<'g>,
}

impl<'de> DeserializeSeed<'de> for StorageSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for StorageSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a storage object of slot → value, or null")
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(slot) = map.next_key::<Bytes>()? {
            let value: Bytes = map.next_value()?;
            let item = GenesisItem::Slot(self.address, word(&slot)?, word(&value)?);
            (self.on_item)(item).map_err(stopped)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_accounts_and_keeps_the_rest() {
        let json = r#"{"config":{"chainId":7},"gasLimit":"0x1000000","difficulty":"0x1",
            "alloc":{"0x0000000000000000000000000000000000000001":{"balance":"0x5"},
                     "0000000000000000000000000000000000000002":{"balance":"0x6","nonce":"0x1"}},
            "extraData":"0x01"}"#;
        let mut seen = Vec::new();
        let head = stream_genesis(json.as_bytes(), |item| {
            if let GenesisItem::Account(a, acc) = item {
                seen.push((a, acc.balance));
            }
            Ok::<(), ()>(())
        })
        .unwrap()
        .unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(head.accounts, 2);
        assert_eq!(head.genesis.config.chain_id, 7);
        assert!(head.genesis.alloc.is_empty());
        assert_eq!(head.genesis.extra_data.as_ref(), &[1u8]);
        // Same allocation in another order: same digest.
        let swapped = r#"{"config":{"chainId":7},"gasLimit":"0x1000000","difficulty":"0x1",
            "alloc":{"0x0000000000000000000000000000000000000002":{"nonce":"0x1","balance":"0x6"},
                     "0x0000000000000000000000000000000000000001":{"balance":"0x5"}},
            "extraData":"0x01"}"#;
        let other = stream_genesis(swapped.as_bytes(), |_| Ok::<(), ()>(())).unwrap().unwrap();
        assert_eq!(other.alloc_digest, head.alloc_digest);
        let changed = swapped.replace("0x5", "0x7");
        let other = stream_genesis(changed.as_bytes(), |_| Ok::<(), ()>(())).unwrap().unwrap();
        assert_ne!(other.alloc_digest, head.alloc_digest);
    }

    #[test]
    fn a_consumer_error_stops_the_read_and_bad_json_is_named() {
        let json = r#"{"alloc":{"0x0000000000000000000000000000000000000001":{"balance":"0x5"}}}"#;
        assert_eq!(stream_genesis(json.as_bytes(), |_| Err("full")).unwrap_err(), "full");
        let bad = r#"{"alloc":{"0xzz":{}}}"#;
        assert!(stream_genesis(bad.as_bytes(), |_| Ok::<(), ()>(())).unwrap().is_err());
        let long = r#"{"alloc":{"0x0000000000000000000000000000000000000001":{"balance":"0x1",
            "storage":{"0x01":"0x000000000000000000000000000000000000000000000000000000000000000001"}}}}"#;
        assert!(stream_genesis(long.as_bytes(), |_| Ok::<(), ()>(())).unwrap().is_err());
    }

    #[test]
    fn storage_is_streamed_slot_by_slot_and_padded() {
        let json = r#"{"alloc":{"0x0000000000000000000000000000000000000001":{
            "storage":{"0x01":"0x22","0x0000000000000000000000000000000000000000000000000000000000000002":"0x00"},
            "balance":"0x1","code":"0x00"}, "0x0000000000000000000000000000000000000002":{"balance":"0x1","storage":null}}}"#;
        let mut items = Vec::new();
        let head = stream_genesis(json.as_bytes(), |item| {
            items.push(item);
            Ok::<(), ()>(())
        })
        .unwrap()
        .unwrap();
        assert_eq!(head.accounts, 2);
        let slots: Vec<_> = items
            .iter()
            .filter_map(|i| match i {
                GenesisItem::Slot(a, k, v) => Some((*a, *k, *v)),
                GenesisItem::Account(..) => None,
            })
            .collect();
        assert_eq!(slots.len(), 2);
        assert_eq!(slots[0].1, B256::with_last_byte(1));
        assert_eq!(slots[0].2, B256::with_last_byte(0x22));
        assert!(items.iter().any(
            |i| matches!(i, GenesisItem::Account(_, a) if a.storage.is_none() && a.code.is_some())
        ));
    }
}
