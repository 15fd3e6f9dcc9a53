//! Writing stored blocks as RLP in the import format (what `loupe export` writes): each block
//! RLP-encoded as `[header, transactions, ommers, withdrawals]`, concatenated.

use std::io::Write;

use crate::dev::DevError;
use crate::storage::Database;

/// Writes blocks `from..=to` of `db` to `out`; returns how many were written.
pub fn write_blocks(
    db: &Database,
    from: u64,
    to: u64,
    out: &mut impl Write,
) -> Result<u64, DevError> {
    let r = db.begin_read()?;
    let mut buf = Vec::new();
    let mut written = 0;
    for n in from..=to {
        let header = r.header(n)?.ok_or(DevError::MissingBlock(n))?;
        let (mut body, _) = r.body(n)?.ok_or(DevError::MissingBlock(n))?;
        body.transactions = r.transactions(n)?.into_iter().map(|t| t.tx).collect();
        buf.clear();
        alloy_rlp::Encodable::encode(&alloy_consensus::Block { header, body }, &mut buf);
        out.write_all(&buf).map_err(|e| DevError::io(format!("writing block {n}"), e))?;
        written += 1;
    }
    Ok(written)
}
