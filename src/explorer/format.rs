//! How values are shown: amounts of ether and gwei, grouped numbers, times, sizes, and the JSON
//! fields of the methods' answers read as numbers.

use alloy_primitives::U256;
use serde_json::Value;

/// `n` with a comma between groups of three digits: `76,960`.
pub(crate) fn grouped(n: impl std::fmt::Display) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `amount` of the smallest unit in units of `10^decimals`, with no trailing zeros:
/// `decimal(1_500_000_000_000_000_000, 18)` is `1.5`.
fn decimal(amount: U256, decimals: usize) -> String {
    let unit = U256::from(10).pow(U256::from(decimals));
    let (whole, frac) = amount.div_rem(unit);
    let whole = grouped(whole);
    if frac.is_zero() {
        return whole;
    }
    let frac = format!("{frac:0>decimals$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// An amount of wei in ether: `1.5 ETH`, `0 ETH`.
pub(crate) fn ether(wei: U256) -> String {
    format!("{} ETH", decimal(wei, 18))
}

/// An amount of wei in gwei: `1.25 gwei`.
pub(crate) fn gwei(wei: U256) -> String {
    format!("{} gwei", decimal(wei, 9))
}

/// A quantity field (`"0x1a"`) of a JSON object; `None` when absent or not a quantity.
pub(crate) fn quantity(v: &Value, key: &str) -> Option<U256> {
    let s = v.get(key)?.as_str()?;
    let digits = s.strip_prefix("0x")?;
    U256::from_str_radix(digits, 16).ok()
}

/// A quantity field that fits in 64 bits; numbers (as `trace_filter` gives block numbers)
/// are taken too.
pub(crate) fn quantity_u64(v: &Value, key: &str) -> Option<u64> {
    if let Some(n) = v.get(key).and_then(Value::as_u64) {
        return Some(n);
    }
    quantity(v, key).and_then(|q| u64::try_from(q).ok())
}

/// A string field of a JSON object; empty when absent or not a string.
pub(crate) fn string<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Bytes of a `0x` hex string.
pub(crate) fn hex_len(s: &str) -> usize {
    s.strip_prefix("0x").unwrap_or(s).len() / 2
}

/// `n` bytes: `1 byte`, `36 bytes`.
pub(crate) fn bytes(n: usize) -> String {
    if n == 1 { "1 byte".into() } else { format!("{} bytes", grouped(n)) }
}

/// A Unix time in UTC: `2024-01-31 12:00:05 UTC`.
pub(crate) fn utc(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem / 60 % 60, rem % 60)
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// `part` as a percentage of `whole`, one decimal: `37.5%`.
pub(crate) fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "–".into();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_numbers_and_times() {
        assert_eq!(grouped(76_960u64), "76,960");
        assert_eq!(grouped(100u64), "100");
        assert_eq!(grouped(1_000_000u64), "1,000,000");
        assert_eq!(ether(U256::ZERO), "0 ETH");
        assert_eq!(ether(U256::from(1_500_000_000_000_000_000u128)), "1.5 ETH");
        assert_eq!(ether(U256::from(1u64)), "0.000000000000000001 ETH");
        assert_eq!(
            ether(U256::from(10_000u128) * U256::from(10u64).pow(U256::from(18))),
            "10,000 ETH"
        );
        assert_eq!(gwei(U256::from(1_250_000_000u64)), "1.25 gwei");
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_709_164_805), "2024-02-29 00:00:05 UTC");
        assert_eq!(bytes(1), "1 byte");
        assert_eq!(hex_len("0xdeadbeef"), 4);
        assert_eq!(percent(1, 8), "12.5%");
        let v = serde_json::json!({"a": "0x1a", "b": 7, "c": "zz"});
        assert_eq!(quantity_u64(&v, "a"), Some(26));
        assert_eq!(quantity_u64(&v, "b"), Some(7));
        assert_eq!(quantity(&v, "c"), None);
    }
}
