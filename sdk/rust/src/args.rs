//! Parsing a rule's argument tokens in `configure`.
//!
//! Errors are short phrases (`"0x1ffff is more than 0xffff"`) that a plugin prefixes with the
//! argument's name.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// An unsigned integer, decimal or `0x` hexadecimal, at most `max`.
pub fn parse_uint(tok: &str, max: u64) -> Result<u64, String> {
    let (digits, radix) = match tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (tok, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(format!("{tok:?} is not a number"));
    }
    let value = u64::from_str_radix(digits, radix).map_err(|_| format!("{tok} is too large"))?;
    if value > max {
        return Err(if radix == 16 {
            format!("{tok} is more than {max:#x}")
        } else {
            format!("{tok} is more than {max}")
        });
    }
    Ok(value)
}

/// Bytes written in hexadecimal (`0x00880022` or `00880022`), two digits a byte.
pub fn parse_hex_bytes(tok: &str) -> Result<Vec<u8>, String> {
    let digits = tok
        .strip_prefix("0x")
        .or_else(|| tok.strip_prefix("0X"))
        .unwrap_or(tok);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("{tok:?} is not hexadecimal bytes"));
    }
    if !digits.len().is_multiple_of(2) {
        return Err(format!("{tok} has an odd number of hex digits"));
    }
    Ok((0..digits.len() / 2)
        .map(|i| u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).expect("hex digits"))
        .collect())
}

/// A duration in milliseconds, nft style: `10s`, `500ms`, `2m`, `1h`, `1d`, combined
/// (`1m30s`), or a bare number of seconds.
pub fn parse_duration_ms(tok: &str) -> Result<u64, String> {
    if !tok.is_empty() && tok.chars().all(|c| c.is_ascii_digit()) {
        return tok
            .parse::<u64>()
            .ok()
            .and_then(|s| s.checked_mul(1000))
            .ok_or_else(|| format!("{tok} is too large"));
    }
    let mut total: u64 = 0;
    let mut rest = tok;
    if rest.is_empty() {
        return Err("empty duration".into());
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if n == 0 {
            return Err(format!(
                "{tok:?} is not a duration (e.g. 10s, 500ms, 1m30s)"
            ));
        }
        let value: u64 = rest[..n]
            .parse()
            .map_err(|_| format!("{tok} is too large"))?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => {
                return Err(format!(
                    "{tok:?} is not a duration (e.g. 10s, 500ms, 1m30s)"
                ));
            }
        };
        rest = &rest[u..];
        total = value
            .checked_mul(scale)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| format!("{tok} is too large"))?;
    }
    Ok(total)
}

/// A quoted string token as the ruleset tokenizer passes it (`"wlan0"`), unquoted; a bare
/// token is returned as is.
pub fn unquote(tok: &str) -> &str {
    tok.strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(tok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uints() {
        assert_eq!(parse_uint("0x0102", 0xffff), Ok(0x0102));
        assert_eq!(parse_uint("42", 0xff_ffff), Ok(42));
        assert_eq!(
            parse_uint("0x824212", 0xffff),
            Err("0x824212 is more than 0xffff".into())
        );
        assert_eq!(parse_uint("4224", 255), Err("4224 is more than 255".into()));
        assert_eq!(parse_uint("0x", 1), Err("\"0x\" is not a number".into()));
        assert_eq!(parse_uint("-1", 1), Err("\"-1\" is not a number".into()));
        assert_eq!(
            parse_uint("99999999999999999999", u64::MAX),
            Err("99999999999999999999 is too large".into())
        );
    }

    #[test]
    fn hex_bytes() {
        assert_eq!(
            parse_hex_bytes("0x00880022"),
            Ok(alloc::vec![0x00, 0x88, 0x00, 0x22])
        );
        assert_eq!(parse_hex_bytes("4288"), Ok(alloc::vec![0x42, 0x88]));
        assert!(parse_hex_bytes("0x428").unwrap_err().contains("odd"));
        assert!(parse_hex_bytes("zz").is_err());
        assert!(parse_hex_bytes("").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("10s"), Ok(10_000));
        assert_eq!(parse_duration_ms("500ms"), Ok(500));
        assert_eq!(parse_duration_ms("1m30s"), Ok(90_000));
        assert_eq!(parse_duration_ms("2h"), Ok(7_200_000));
        assert_eq!(parse_duration_ms("1d"), Ok(86_400_000));
        assert_eq!(parse_duration_ms("7"), Ok(7_000));
        assert!(parse_duration_ms("10x").is_err());
        assert!(parse_duration_ms("s").is_err());
        assert!(parse_duration_ms("").is_err());
        assert!(parse_duration_ms("99999999999999999999d").is_err());
    }

    #[test]
    fn quotes() {
        assert_eq!(unquote("\"wlan0\""), "wlan0");
        assert_eq!(unquote("wlan0"), "wlan0");
        assert_eq!(unquote("\""), "\"");
    }
}
