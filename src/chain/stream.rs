//! Streaming `genesis.json`: the allocation is handed out one account at a time, so a genesis
//! with tens of millions of accounts is read in bounded memory. Everything else in the file is
//! kept (it is small) and becomes the [`Genesis`] with an empty `alloc`.

use std::io::Read;

use alloy_genesis::{Genesis, GenesisAccount};
use alloy_primitives::{Address, U256, keccak256};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};

use super::ChainError;

/// What streaming a genesis file produced besides the accounts.
#[derive(Debug, Clone)]
pub struct GenesisHead {
    /// The genesis without its allocation (`alloc` is empty).
    pub genesis: Genesis,
    /// The same, as JSON text: what a datadir stores.
    pub json: String,
    /// Accounts in the allocation.
    pub accounts: u64,
    /// An order-independent digest of the allocation (the wrapping sum of one keccak per
    /// account over its address, nonce, balance, code and storage), so that two files with the
    /// same allocation in any order and formatting compare equal without building the trie.
    pub alloc_digest: U256,
}

/// Digest of one allocation entry (see [`GenesisHead::alloc_digest`]).
pub fn account_digest(address: &Address, account: &GenesisAccount) -> U256 {
    let mut buf = Vec::with_capacity(128);
    buf.extend_from_slice(address.as_slice());
    buf.extend_from_slice(&account.nonce.unwrap_or_default().to_be_bytes());
    buf.extend_from_slice(&account.balance.to_be_bytes::<32>());
    let code = account.code.as_ref().filter(|c| !c.is_empty());
    buf.extend_from_slice(code.map(keccak256).unwrap_or_default().as_slice());
    for (slot, value) in account.storage.iter().flatten() {
        if !value.is_zero() {
            buf.extend_from_slice(slot.as_slice());
            buf.extend_from_slice(value.as_slice());
        }
    }
    U256::from_be_bytes(keccak256(&buf).0)
}

/// Reads a geth-style genesis from `reader`, calling `on_account` for every allocation entry in
/// file order. An error from `on_account` stops the read and is returned as is.
pub fn stream_genesis<R, E>(
    reader: R,
    mut on_account: impl FnMut(Address, GenesisAccount) -> Result<(), E>,
) -> Result<Result<GenesisHead, ChainError>, E>
where
    R: Read,
{
    let mut failure: Option<E> = None;
    let mut accounts = 0u64;
    let mut digest = U256::ZERO;
    let mut de =
        serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(1 << 20, reader));
    let top = TopSeed {
        on_account: &mut |address, account: GenesisAccount| {
            accounts += 1;
            digest = digest.wrapping_add(account_digest(&address, &account));
            on_account(address, account).map_err(|e| {
                failure = Some(e);
            })
        },
    };
    let parsed = top.deserialize(&mut de).and_then(|map| de.end().map(|()| map));
    if let Some(e) = failure {
        return Err(e);
    }
    let parse = |error| ChainError::Parse { path: "<json>".into(), error };
    let mut map = match parsed {
        Ok(map) => map,
        Err(error) => return Ok(Err(parse(error))),
    };
    map.insert("alloc".into(), serde_json::Value::Object(Default::default()));
    let json = serde_json::Value::Object(map);
    let text = json.to_string();
    Ok(serde_json::from_value::<Genesis>(json).map_err(parse).map(|genesis| GenesisHead {
        genesis,
        json: text,
        accounts,
        alloc_digest: digest,
    }))
}

type AccountFn<'f> = dyn FnMut(Address, GenesisAccount) -> Result<(), ()> + 'f;

struct TopSeed<'f, 'g> {
    on_account: &'f mut AccountFn<'g>,
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
            if key == "alloc" {
                map.next_value_seed(AllocSeed { on_account: &mut *self.on_account })?;
            } else {
                let value: serde_json::Value = map.next_value()?;
                out.insert(key, value);
            }
        }
        Ok(out)
    }
}

struct AllocSeed<'f, 'g> {
    on_account: &'f mut AccountFn<'g>,
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
            let account: GenesisAccount = map.next_value()?;
            (self.on_account)(address, account)
                .map_err(|()| serde::de::Error::custom("stopped by the allocation's consumer"))?;
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
        let head = stream_genesis(json.as_bytes(), |a, acc| {
            seen.push((a, acc.balance));
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
        let other = stream_genesis(swapped.as_bytes(), |_, _| Ok::<(), ()>(())).unwrap().unwrap();
        assert_eq!(other.alloc_digest, head.alloc_digest);
        let changed = swapped.replace("0x5", "0x7");
        let other = stream_genesis(changed.as_bytes(), |_, _| Ok::<(), ()>(())).unwrap().unwrap();
        assert_ne!(other.alloc_digest, head.alloc_digest);
    }

    #[test]
    fn a_consumer_error_stops_the_read_and_bad_json_is_named() {
        let json = r#"{"alloc":{"0x0000000000000000000000000000000000000001":{"balance":"0x5"}}}"#;
        assert_eq!(stream_genesis(json.as_bytes(), |_, _| Err("full")).unwrap_err(), "full");
        let bad = r#"{"alloc":{"0xzz":{}}}"#;
        assert!(stream_genesis(bad.as_bytes(), |_, _| Ok::<(), ()>(())).unwrap().is_err());
    }
}
