//! What a request says: percent-decoding of paths and queries, percent-encoding for the links
//! pages write, and the parsers of hashes, addresses, block references, amounts and hex data,
//! each refusing with a message that says what was expected.

use alloy_primitives::{Address, B256, Bytes, U256};

use crate::explorer::ExplorerError;

/// Longest piece of a request quoted back in an error message.
const QUOTE_MAX: usize = 80;

/// `s` as an error message quotes it: at most [`QUOTE_MAX`] characters.
pub(crate) fn quote(s: &str) -> String {
    match s.char_indices().nth(QUOTE_MAX) {
        Some((i, _)) => format!("\"{}…\"", &s[..i]),
        None => format!("\"{s}\""),
    }
}

/// Decodes `%XX` escapes (and `+` as a space when `plus` is set, as forms send it).
pub(crate) fn percent_decode(s: &str, plus: bool) -> Result<String, ExplorerError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
                let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or_else(|| {
                    ExplorerError::BadRequest(format!("bad percent-escape in {}", quote(s)))
                })?;
                out.push(byte);
                i += 3;
            }
            b'+' if plus => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out)
        .map_err(|_| ExplorerError::BadRequest(format!("{} is not UTF-8 text", quote(s))))
}

/// Percent-encodes `s` for a query value: everything but unreserved characters.
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(char::from(b"0123456789ABCDEF"[usize::from(b >> 4)]));
            out.push(char::from(b"0123456789ABCDEF"[usize::from(b & 15)]));
        }
    }
    out
}

/// A query string's pairs, decoded; a key given twice keeps its last value.
#[derive(Debug, Default)]
pub(crate) struct Query(Vec<(String, String)>);

/// Most pairs a query may hold.
const MAX_PAIRS: usize = 32;

impl Query {
    /// Parses `query` (`a=1&b=2`, form-encoded).
    pub(crate) fn parse(query: Option<&str>) -> Result<Self, ExplorerError> {
        let mut pairs = Vec::new();
        for part in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            if pairs.len() == MAX_PAIRS {
                return Err(ExplorerError::BadRequest(format!(
                    "too many query parameters (at most {MAX_PAIRS})"
                )));
            }
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            pairs.push((percent_decode(k, true)?, percent_decode(v, true)?));
        }
        Ok(Self(pairs))
    }

    /// The value of `key`, trimmed; `None` when absent or empty.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.trim()).filter(|v| !v.is_empty())
    }
}

/// Hex digits after an optional `0x`, or `None` if anything else is there.
fn hex_digits(s: &str) -> Option<&str> {
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    digits.bytes().all(|b| b.is_ascii_hexdigit()).then_some(digits)
}

/// A 32-byte hash: `0x` and 64 hex digits.
pub(crate) fn hash(s: &str, what: &str) -> Result<B256, ExplorerError> {
    match hex_digits(s) {
        Some(d) if d.len() == 64 && s.len() == 66 => {
            d.parse::<B256>().map_err(|_| bad_hash(s, what))
        }
        _ => Err(bad_hash(s, what)),
    }
}

fn bad_hash(s: &str, what: &str) -> ExplorerError {
    ExplorerError::BadRequest(format!(
        "{} is not a {what} hash: a hash is 0x and 64 hex digits",
        quote(s)
    ))
}

/// An address: `0x` and 40 hex digits (any case; the checksum is not required).
pub(crate) fn address(s: &str) -> Result<Address, ExplorerError> {
    match hex_digits(s) {
        Some(d) if d.len() == 40 && s.len() == 42 => {
            d.parse::<Address>().map_err(|_| bad_address(s))
        }
        _ => Err(bad_address(s)),
    }
}

fn bad_address(s: &str) -> ExplorerError {
    ExplorerError::BadRequest(format!(
        "{} is not an address: an address is 0x and 40 hex digits",
        quote(s)
    ))
}

/// A block as a page names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockId {
    /// By number.
    Number(u64),
    /// By hash.
    Hash(B256),
    /// The head.
    Latest,
}

impl BlockId {
    /// The JSON-RPC block parameter.
    pub(crate) fn param(&self) -> String {
        match self {
            Self::Number(n) => format!("{n:#x}"),
            Self::Hash(h) => format!("{h}"),
            Self::Latest => "latest".into(),
        }
    }

    /// As a page shows it and a query carries it.
    pub(crate) fn label(&self) -> String {
        match self {
            Self::Number(n) => n.to_string(),
            Self::Hash(h) => format!("{h}"),
            Self::Latest => "latest".into(),
        }
    }
}

/// A block: a decimal number, a `0x` number, a 32-byte hash, or `latest`.
pub(crate) fn block_id(s: &str) -> Result<BlockId, ExplorerError> {
    if s.eq_ignore_ascii_case("latest") {
        return Ok(BlockId::Latest);
    }
    if s.len() == 66 {
        return hash(s, "block").map(BlockId::Hash);
    }
    number(s).map(BlockId::Number).ok_or_else(|| {
        ExplorerError::BadRequest(format!(
            "{} is not a block: give a number (12 or 0xc), a block hash (0x and 64 hex digits) \
             or latest",
            quote(s)
        ))
    })
}

/// A block number, decimal or `0x` hex.
pub(crate) fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) if !h.is_empty() => u64::from_str_radix(h, 16).ok(),
        Some(_) => None,
        None if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
        None => None,
    }
}

/// An amount of wei: decimal, or `0x` hex.
pub(crate) fn wei(s: &str) -> Result<U256, ExplorerError> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) if !h.is_empty() && h.len() <= 64 => U256::from_str_radix(h, 16).ok(),
        Some(_) => None,
        None if !s.is_empty() && s.len() <= 78 && s.bytes().all(|b| b.is_ascii_digit()) => {
            U256::from_str_radix(s, 10).ok()
        }
        None => None,
    };
    parsed.ok_or_else(|| {
        ExplorerError::BadRequest(format!(
            "{} is not an amount of wei: give a whole number, decimal or 0x hex",
            quote(s)
        ))
    })
}

/// Bytes as hex, with or without `0x`; whitespace inside is ignored (pasted data wraps).
pub(crate) fn hex_data(s: &str) -> Result<Bytes, ExplorerError> {
    let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let digits = hex_digits(&compact).filter(|d| d.len() % 2 == 0).ok_or_else(|| {
        ExplorerError::BadRequest(format!(
            "{} is not hex data: give an even number of hex digits, with or without 0x",
            quote(s)
        ))
    })?;
    alloy_primitives::hex::decode(digits)
        .map(Bytes::from)
        .map_err(|e| ExplorerError::BadRequest(format!("{}: {e}", quote(s))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode_and_links_encode() {
        let q = Query::parse(Some("to=0xAb&data=%3Cimg+src%3Dx%3E&empty=&to=0xcd")).unwrap();
        assert_eq!(q.get("to"), Some("0xcd"));
        assert_eq!(q.get("data"), Some("<img src=x>"));
        assert_eq!(q.get("empty"), None);
        assert!(Query::parse(Some("a=%zz")).is_err());
        assert!(Query::parse(Some("a=%ff")).is_err());
        assert_eq!(percent_encode("<a b>&0x1"), "%3Ca%20b%3E%260x1");
    }

    #[test]
    fn parsers_refuse_what_is_not_what_they_take() {
        assert!(hash(&format!("0x{}", "ab".repeat(32)), "transaction").is_ok());
        assert!(hash(&format!("0x{}", "ab".repeat(31)), "transaction").is_err());
        assert!(hash(&"ab".repeat(33), "transaction").is_err());
        assert!(address("0x5fbdb2315678afecb367f032d93f642f64180aa3").is_ok());
        assert!(address("0x5fbdb2315678afecb367f032d93f642f64180aaz").is_err());
        assert!(address("5fbdb2315678afecb367f032d93f642f64180aa3").is_err());
        assert_eq!(block_id("13").unwrap(), BlockId::Number(13));
        assert_eq!(block_id("0xd").unwrap(), BlockId::Number(13));
        assert_eq!(block_id("Latest").unwrap(), BlockId::Latest);
        assert!(block_id("-1").is_err() && block_id("0x").is_err() && block_id("1e3").is_err());
        assert_eq!(wei("1000").unwrap(), U256::from(1000));
        assert_eq!(wei("0x10").unwrap(), U256::from(16));
        assert!(wei("1.5").is_err() && wei("").is_err());
        assert_eq!(hex_data("0x60 00\n").unwrap().to_vec(), vec![0x60, 0]);
        assert!(hex_data("0x600").is_err() && hex_data("zz").is_err());
        assert!(quote(&"x".repeat(200)).ends_with("…\""));
    }
}
