//! Fingerprints and keys: the canonical JSON of a payload hashed
//! ([`fingerprint`], and [`json_fingerprint`], exact in a text's numbers
//! and repeated keys), and a list of parts hashed into a bounded key that
//! never shows its input ([`hashed_key`]). No I/O.

use std::collections::BTreeMap;

use serde_json::{Number, Value};
use sha2::{Digest, Sha256};

/// SHA-256 of the value's canonical JSON (object keys sorted at every
/// level, no insignificant whitespace), in hex: two payloads that differ
/// only in key order or whitespace have the same fingerprint.
pub fn fingerprint(value: &Value) -> String {
    let mut canonical = String::new();
    Node::of(value).write(&mut canonical);
    hex(&Sha256::digest(canonical.as_bytes()))
}

/// [`fingerprint`] of a JSON text, exact in its numbers and in its keys.
///
/// - Numbers: a parsed [`Value`] holds a number that is neither a `u64`
///   nor an `i64` as an `f64`, so two texts that differ only beyond an
///   `f64`'s precision (`0.1000000000000000001` and `0.1`,
///   `9007199254740993.0` and `9007199254740992.0`, `1e-400` and `0`)
///   would have one fingerprint, and the second request would replay the
///   first one's answer. And serde_json (built without `float_roundtrip`)
///   misreads about one full-precision double in ten by a unit in the last
///   place, so that `51882954.848336324` and `51882954.84833632` would read
///   as one number. Here a number is hashed by the text of its correctly
///   rounded `f64` when that double is exactly the text's value, and by
///   its exact decimal value otherwise. For every number serde_json reads
///   correctly, that is the text [`fingerprint`] hashes: the fingerprints
///   stored before are still found.
/// - Keys: an object that repeats a key (`{"a":1,"a":2}`) is not the
///   object of its last value (`{"a":2}`), which is what a [`Value`]
///   keeps: each of its values is hashed, in order. A service may refuse
///   the first and accept the second; replaying the refusal to the
///   corrected request would be wrong.
///
/// Errors: the text is not JSON (serde_json's error, which gives a
/// position, never the input).
pub fn json_fingerprint(text: &[u8]) -> Result<String, serde_json::Error> {
    let value: Value = serde_json::from_slice(text)?;
    // serde_json has checked the text (and bounded its depth, which bounds
    // the recursion here): the exact reading cannot fail but on a bug,
    // and then the value's fingerprint is the one answer left.
    let mut scan = Scan { text, at: 0 };
    let Some(node) = scan.node() else {
        return Ok(fingerprint(&value));
    };
    let mut canonical = String::new();
    node.write(&mut canonical);
    Ok(hex(&Sha256::digest(canonical.as_bytes())))
}

/// A JSON value read from its text for [`json_fingerprint`]: objects by
/// sorted key (a repeated key keeps every value, in order), scalars as
/// their canonical text.
enum Node {
    Object(BTreeMap<String, Vec<Node>>),
    Array(Vec<Node>),
    Scalar(String),
}

impl Node {
    /// A parsed value's tree ([`fingerprint`]'s): no key repeats, and a
    /// scalar is serde_json's one compact text of it.
    fn of(value: &Value) -> Node {
        match value {
            Value::Object(map) => Node::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), vec![Node::of(v)]))
                    .collect(),
            ),
            Value::Array(items) => Node::Array(items.iter().map(Node::of).collect()),
            scalar => Node::Scalar(scalar.to_string()),
        }
    }

    /// The canonical form: object keys sorted, no insignificant
    /// whitespace; a repeated key is written once per value (which no
    /// object without one can be written as).
    fn write(&self, out: &mut String) {
        match self {
            Node::Object(map) => {
                out.push('{');
                let mut first = true;
                for (k, values) in map {
                    for v in values {
                        if !first {
                            out.push(',');
                        }
                        first = false;
                        out.push_str(&Value::String(k.clone()).to_string());
                        out.push(':');
                        v.write(out);
                    }
                }
                out.push('}');
            }
            Node::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Node::Scalar(text) => out.push_str(text),
        }
    }
}

/// A reader of JSON text that serde_json has already accepted: `None`
/// on anything it does not expect, never a panic.
struct Scan<'a> {
    text: &'a [u8],
    at: usize,
}

impl Scan<'_> {
    fn peek(&mut self) -> Option<u8> {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.text.get(self.at) {
            self.at += 1;
        }
        self.text.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn node(&mut self) -> Option<Node> {
        match self.peek()? {
            b'{' => {
                self.at += 1;
                let mut map = BTreeMap::new();
                if self.eat(b'}').is_some() {
                    return Some(Node::Object(map));
                }
                loop {
                    let key = self.string()?;
                    self.eat(b':')?;
                    let value = self.node()?;
                    map.entry(key).or_insert_with(Vec::new).push(value);
                    if self.eat(b',').is_none() {
                        self.eat(b'}')?;
                        return Some(Node::Object(map));
                    }
                }
            }
            b'[' => {
                self.at += 1;
                let mut items = Vec::new();
                if self.eat(b']').is_some() {
                    return Some(Node::Array(items));
                }
                loop {
                    items.push(self.node()?);
                    if self.eat(b',').is_none() {
                        self.eat(b']')?;
                        return Some(Node::Array(items));
                    }
                }
            }
            b'"' => Some(Node::Scalar(Value::String(self.string()?).to_string())),
            _ => {
                let start = self.at;
                while let Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9' | b'a'..=b'z') =
                    self.text.get(self.at)
                {
                    self.at += 1;
                }
                let token = self.text.get(start..self.at)?;
                match serde_json::from_slice::<Value>(token).ok()? {
                    Value::Number(n) => Some(Node::Scalar(number_text(token, &n)?)),
                    // true, false, null
                    other @ (Value::Bool(_) | Value::Null) => Some(Node::Scalar(other.to_string())),
                    _ => None,
                }
            }
        }
    }

    /// A string token, decoded.
    fn string(&mut self) -> Option<String> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.at;
        self.at += 1;
        loop {
            match self.text.get(self.at)? {
                b'\\' => self.at += 2,
                b'"' => break,
                _ => self.at += 1,
            }
        }
        self.at += 1;
        serde_json::from_slice(self.text.get(start..self.at)?).ok()
    }
}

/// A number's canonical text: an integer's (a `u64` or `i64`, exact);
/// otherwise the text of the number's correctly rounded `f64` (the
/// standard library's parse, not serde_json's, which may land a unit off)
/// when that double's value is exactly the text's; otherwise the text's
/// exact decimal value, as `{digits}e{exponent}` (which no `f64`'s text
/// can be: it would have the same value).
fn number_text(token: &[u8], n: &Number) -> Option<String> {
    if !n.is_f64() {
        return Some(n.to_string());
    }
    let exact = decimal(token)?;
    let nearest: f64 = std::str::from_utf8(token).ok()?.parse().ok()?;
    let nearest = Number::from_f64(nearest)?.to_string();
    if decimal(nearest.as_bytes())? == exact {
        return Some(nearest);
    }
    let (negative, digits, exponent) = exact;
    Some(format!(
        "{}{digits}e{exponent}",
        if negative { "-" } else { "" }
    ))
}

/// A JSON number's exact value: its sign, its significant digits (no
/// leading or trailing zeros; none for zero, whose sign is dropped) and
/// the power of ten they are multiplied by.
fn decimal(text: &[u8]) -> Option<(bool, String, i64)> {
    let (negative, rest) = match text.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, text),
    };
    let (mantissa, exponent) = match rest.iter().position(|b| matches!(b, b'e' | b'E')) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &b""[..]),
    };
    let (int, frac) = match mantissa.iter().position(|b| *b == b'.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, &b""[..]),
    };
    // The exponent, saturated: a text's exponent may be any length.
    let (exp_negative, exp_digits) = match exponent.split_first() {
        Some((b'-', d)) => (true, d),
        Some((b'+', d)) => (false, d),
        _ => (false, exponent),
    };
    let mut exp: i64 = 0;
    for d in exp_digits {
        if !d.is_ascii_digit() {
            return None;
        }
        exp = exp.saturating_mul(10).saturating_add(i64::from(d - b'0'));
    }
    if exp_negative {
        exp = -exp;
    }
    let mut digits: Vec<u8> = int.iter().chain(frac).copied().collect();
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let frac_len = i64::try_from(frac.len()).ok()?;
    exp = exp.saturating_sub(frac_len);
    while digits.last() == Some(&b'0') {
        digits.pop();
        exp = exp.saturating_add(1);
    }
    let first = digits
        .iter()
        .position(|d| *d != b'0')
        .unwrap_or(digits.len());
    let digits = String::from_utf8(digits[first..].to_vec()).ok()?;
    if digits.is_empty() {
        return Some((false, digits, 0));
    }
    Some((negative, digits, exp))
}

/// A key made of `parts`, hashed (SHA-256, hex), each part
/// length-prefixed so that no two lists of parts hash alike: bounded
/// whatever the input's length, and never the input in the clear.
pub fn hashed_key(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for part in parts {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    hex(&h.finalize())
}

/// `bytes` in lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_fingerprint_ignores_key_order_and_whitespace_only() {
        let a: Value =
            serde_json::from_str(r#"{"id":"c","amount":5,"x":{"b":1,"a":[1,2]}}"#).unwrap();
        let b: Value = serde_json::from_str(
            " {\n \"x\": {\"a\": [1, 2], \"b\": 1}, \"amount\": 5, \"id\": \"c\"}",
        )
        .unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        // The canonical text itself, pinned: fingerprints stored by earlier
        // versions must still be found.
        let canonical = r#"{"amount":5,"id":"c","x":{"a":[1,2],"b":1}}"#;
        assert_eq!(fingerprint(&a), hex(&Sha256::digest(canonical.as_bytes())));
        for other in [
            json!({"id":"c","amount":6,"x":{"b":1,"a":[1,2]}}),
            json!({"id":"c","amount":5,"x":{"b":1,"a":[2,1]}}),
            json!({"id":"c","amount":5}),
            json!({"id":"c","amount":"5","x":{"b":1,"a":[1,2]}}),
        ] {
            assert_ne!(fingerprint(&a), fingerprint(&other), "{other}");
        }
    }

    #[test]
    fn the_json_fingerprint_is_exact_in_numbers_and_unchanged_where_f64_is() {
        let fp = |t: &str| json_fingerprint(t.as_bytes()).unwrap();
        let old = |t: &str| fingerprint(&serde_json::from_str(t).unwrap());
        // Numbers an f64 (or u64, i64) holds exactly: the fingerprint
        // stored before, whatever the spelling serde_json reads them from.
        for t in [
            r#"{"amount":150000,"currency":"INR","x":[1,-2,{"b":true,"a":null}]}"#,
            r#"{"a":0.1,"b":1.5,"c":1.50,"d":1e2,"e":-0.0,"f":2.5e-3,"g":"s"}"#,
            r#"{"u":18446744073709551615,"i":-9223372036854775808,"z":0.000}"#,
            r#"[1e300, 123456789.125, {"k": 5e-324}]"#,
        ] {
            assert_eq!(fp(t), old(t), "{t}");
        }
        // Integers a u64 holds were exact already.
        assert_ne!(fp("9007199254740993"), fp("9007199254740992"));
        // Beyond an f64: each its own fingerprint, none equal to another's.
        // (serde_json's own parse lands 9007199254740993.0 elsewhere, but
        // no less beside the exact value.)
        let lossy = [
            ("0.1000000000000000001", "0.1", true),
            ("9007199254740993.0", "9007199254740992.0", false),
            ("18446744073709551617", "18446744073709551616", true),
            ("-9223372036854775809", "-9223372036854775808.0", true),
            ("1e-400", "0.0", true),
            ("1.00000000000000000000001", "1.0", true),
        ];
        for (a, b, confused) in lossy {
            let (a, b) = (
                format!(r#"{{"n":[{a}],"m":1}}"#),
                format!(r#"{{"n":[{b}],"m":1}}"#),
            );
            assert_ne!(fp(&a), fp(&b), "{a} {b}");
            if confused {
                assert_eq!(old(&a), old(&b), "f64 alone confuses them: {a}");
            }
        }
        // The exact reading still ignores key order and whitespace, and
        // reads strings and escapes.
        assert_eq!(
            fp(r#"{"b":"x\"y\u00e9","a":[0.1000000000000000001, true]}"#),
            fp(r#" { "a" : [ 1000000000000000001e-19 , true ] , "b" : "x\"yé" } "#)
        );
        assert!(json_fingerprint(b"{not json").is_err());
    }

    #[test]
    fn a_repeated_key_is_not_its_last_value() {
        let fp = |t: &str| json_fingerprint(t.as_bytes()).unwrap();
        // A Value keeps the last: the old fingerprint confused them.
        let old = |t: &str| fingerprint(&serde_json::from_str(t).unwrap());
        for (repeated, last) in [
            (r#"{"a":1,"a":2}"#, r#"{"a":2}"#),
            (r#"{"a":1,"a":2.5}"#, r#"{"a":2.5}"#),
            (
                r#"{"x":{"a":"s","a":"t"},"b":1}"#,
                r#"{"b":1,"x":{"a":"t"}}"#,
            ),
            (
                r#"{"a":0.1000000000000000001,"a":0.3000000000000000001}"#,
                r#"{"a":0.3000000000000000001}"#,
            ),
        ] {
            assert_ne!(fp(repeated), fp(last), "{repeated}");
            assert_eq!(old(repeated), old(last), "{repeated}");
        }
        // The same repeats in the same order, spelled otherwise: one.
        assert_eq!(
            fp(r#"{"a":1,"b":0,"a":2}"#),
            fp(r#"{ "b":0, "a":1, "a":2 }"#)
        );
        assert_ne!(fp(r#"{"a":1,"a":2}"#), fp(r#"{"a":2,"a":1}"#));
    }

    #[test]
    fn a_double_serde_json_misreads_keeps_its_own_fingerprint() {
        let fp = |t: &str| json_fingerprint(t.as_bytes()).unwrap();
        // serde_json (no float_roundtrip) reads the first as the second.
        let (a, b) = ("51882954.848336324", "51882954.84833632");
        assert_ne!(a.parse::<f64>().unwrap(), b.parse::<f64>().unwrap());
        assert_ne!(
            fp(&format!(r#"{{"price":{a}}}"#)),
            fp(&format!(r#"{{"price":{b}}}"#))
        );
        // Each is the fingerprint of its correctly rounded double's text.
        let right = |t: &str| {
            let v: f64 = t.parse().unwrap();
            fingerprint(&json!({ "price": v }))
        };
        assert_eq!(fp(&format!(r#"{{"price":{a}}}"#)), right(a));
        assert_eq!(fp(&format!(r#"{{"price":{b}}}"#)), right(b));
    }

    proptest::proptest! {
        /// Any double and its neighbours a unit or two away: their texts
        /// (the shortest, and 17 digits) never share a fingerprint, and
        /// the shortest one's is the fingerprint of the double itself.
        #[test]
        fn every_double_has_its_own_fingerprint(bits in proptest::num::u64::ANY, step in 1u64..3) {
            let x = f64::from_bits(bits);
            proptest::prop_assume!(x.is_finite());
            let next = f64::from_bits(bits.wrapping_add(step));
            proptest::prop_assume!(next.is_finite());
            let fp = |t: String| json_fingerprint(format!(r#"{{"n":{t}}}"#).as_bytes()).unwrap();
            let full = |v: f64| format!("{v:.16e}");
            let short = |v: f64| format!("{v:e}");
            // The text serde_json writes of the double: the double's own
            // fingerprint. (Rust's shortest text may end in another digit
            // that reads back as the same double: another decimal, and so
            // another fingerprint, like any other spelling of a number.)
            let ryu = Number::from_f64(x).map(|n| n.to_string()).unwrap_or_default();
            proptest::prop_assert_eq!(fp(ryu), fingerprint(&json!({ "n": x })));
            if x != next {
                proptest::prop_assert_ne!(fp(full(x)), fp(full(next)));
                proptest::prop_assert_ne!(fp(short(x)), fp(short(next)));
            }
        }
    }

    #[test]
    fn hashed_keys_separate_their_parts() {
        let keys = [
            hashed_key(&["ab", "c"]),
            hashed_key(&["a", "bc"]),
            hashed_key(&["abc"]),
            hashed_key(&["abc", ""]),
        ];
        let distinct: std::collections::HashSet<_> = keys.iter().collect();
        assert_eq!(distinct.len(), keys.len());
        assert!(keys.iter().all(|k| k.len() == 64 && !k.contains("abc")));
    }
}
