//! A block's access list (EIP-7928) as [`super::tables::ACCESS_LISTS`] and its segment files
//! keep it: the RLP list the header's `blockAccessListHash` commits to, compressed with zstd in
//! the table when it is long, plain in a segment (whose blocks are compressed whole).

use std::borrow::Cow;

use alloy_eip7928::BlockAccessList;
use alloy_rlp::Decodable;

/// First byte of a row holding the RLP list as it is.
const PLAIN: u8 = 0;
/// First byte of a row holding the RLP list's length (u32 BE) and the list compressed with
/// zstd, with its content checksum. An access list repeats addresses and slots' leading zeros.
const ZSTD: u8 = 1;
/// A list at most this long stays plain (a zstd frame has a few bytes of its own).
const COMPRESS_FROM: usize = 128;
/// The longest list a compressed row may claim: a list is bounded by its block's gas limit
/// (2,000 gas an item); this bounds the memory a corrupt row can ask for.
const MAX_LIST: usize = 256 << 20;

/// Encodes `list` as a row of [`super::tables::ACCESS_LISTS`].
pub(crate) fn encode_access_list(list: &BlockAccessList, out: &mut Vec<u8>) {
    let start = out.len();
    out.push(PLAIN);
    alloy_rlp::encode_list(list, out);
    let rlp = &out[start + 1..];
    if rlp.len() <= COMPRESS_FROM {
        return;
    }
    let Ok(length) = u32::try_from(rlp.len()) else { return };
    // Compression does not fail on a buffer in memory; if it did, the row stays plain.
    let packed = zstd::bulk::Compressor::new(1).and_then(|mut c| {
        c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
        c.compress(rlp)
    });
    if let Ok(packed) = packed {
        out.truncate(start);
        out.push(ZSTD);
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&packed);
    }
}

/// The RLP list of a row, its zstd frame undone where it has one.
fn rlp_of(row: &[u8]) -> Result<Cow<'_, [u8]>, alloy_rlp::Error> {
    match row.split_first() {
        Some((&PLAIN, rlp)) => Ok(Cow::Borrowed(rlp)),
        Some((&ZSTD, rest)) => {
            let Some((length, packed)) = rest.split_first_chunk::<4>() else {
                return Err(alloy_rlp::Error::Custom("compressed access list row is truncated"));
            };
            let length = u32::from_be_bytes(*length) as usize;
            if length > MAX_LIST {
                return Err(alloy_rlp::Error::Custom("compressed access list row claims too much"));
            }
            let rlp = zstd::bulk::decompress(packed, length)
                .map_err(|_| alloy_rlp::Error::Custom("access list row does not decompress"))?;
            if rlp.len() != length {
                return Err(alloy_rlp::Error::Custom(
                    "access list row decompresses to another length",
                ));
            }
            Ok(Cow::Owned(rlp))
        }
        _ => Err(alloy_rlp::Error::Custom("access list row of an unknown layout")),
    }
}

/// Decodes a row of [`super::tables::ACCESS_LISTS`] (or of its segment files).
pub(crate) fn decode_access_list(row: &[u8]) -> Result<BlockAccessList, alloy_rlp::Error> {
    let rlp = rlp_of(row)?;
    let mut slice = rlp.as_ref();
    let list = BlockAccessList::decode(&mut slice)?;
    if !slice.is_empty() {
        return Err(alloy_rlp::Error::Custom("access list row has trailing bytes"));
    }
    Ok(list)
}

/// A row as a segment keeps it: plain, so that the segment's block compression sees it.
pub(crate) fn plain_access_list_row(row: &[u8]) -> Result<Cow<'_, [u8]>, alloy_rlp::Error> {
    match row.first() {
        Some(&ZSTD) => {
            let rlp = rlp_of(row)?;
            let mut out = Vec::with_capacity(rlp.len() + 1);
            out.push(PLAIN);
            out.extend_from_slice(&rlp);
            Ok(Cow::Owned(out))
        }
        _ => Ok(Cow::Borrowed(row)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_eip7928::{
        AccountChanges, BalanceChange, BlockAccessIndex, SlotChanges, StorageChange,
    };
    use alloy_primitives::{Address, U256};

    fn list(accounts: usize) -> BlockAccessList {
        (0..accounts)
            .map(|i| {
                let mut a = AccountChanges::new(Address::with_last_byte(i as u8));
                a.storage_reads.push(U256::from(i));
                a.storage_changes.push(SlotChanges::new(
                    U256::from(i + 1000),
                    vec![StorageChange::new(BlockAccessIndex::new(1), U256::from(7))],
                ));
                a.balance_changes
                    .push(BalanceChange::new(BlockAccessIndex::new(2), U256::from(i * 3)));
                a
            })
            .collect()
    }

    /// Short and long lists (plain and compressed rows) read back as written, their hash the
    /// one EIP-7928 gives the list, and a segment's plain row reads the same.
    #[test]
    fn rows_read_back_with_the_same_hash() {
        for n in [0, 1, 40] {
            let l = list(n);
            let mut row = Vec::new();
            encode_access_list(&l, &mut row);
            assert_eq!(row[0], if n == 40 { ZSTD } else { PLAIN });
            let back = decode_access_list(&row).unwrap();
            assert_eq!(back, l);
            assert_eq!(
                alloy_eip7928::compute_block_access_list_hash(&back),
                alloy_eip7928::compute_block_access_list_hash(&l)
            );
            let plain = plain_access_list_row(&row).unwrap();
            assert_eq!(plain[0], PLAIN);
            assert_eq!(decode_access_list(&plain).unwrap(), l);
        }
        assert!(decode_access_list(&[9, 1, 2]).is_err());
        assert!(decode_access_list(&[ZSTD, 0, 0, 0]).is_err());
    }
}
