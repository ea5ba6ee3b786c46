//! Terraform's values as they cross the protocol: cty's msgpack encoding (`DynamicValue.msgpack`)
//! and JSON (`RawState.json`), decoded into [`Val`] and encoded back.
//!
//! Objects and maps are msgpack maps, lists and sets arrays, null is nil, and an unknown
//! value is msgpack extension type 0 or 12 (its payload, cty's refinements, is skipped).
//! Encoding needs no type: the schema gives Terraform the type, and [`crate::schema`]
//! conforms every value to it first (missing attributes null, extra ones dropped), which
//! keeps a `map(string)` a map whatever it holds.

use std::collections::BTreeMap;
use std::io::Cursor;

use rmp::Marker;
use serde_json::{Number, Value};

use crate::error::Error;

/// How deep a value may nest (bounds the decoder's recursion).
const MAX_DEPTH: usize = 64;

/// A Terraform value: known (null included) or unknown.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    /// Null.
    Null,
    /// Not known until apply.
    Unknown,
    /// A bool.
    Bool(bool),
    /// A number.
    Number(Number),
    /// A string.
    String(String),
    /// A list, a set or a tuple.
    List(Vec<Val>),
    /// An object or a map.
    Map(BTreeMap<String, Val>),
}

impl Val {
    /// True when this value or any value inside it is unknown.
    pub fn has_unknown(&self) -> bool {
        match self {
            Val::Unknown => true,
            Val::List(items) => items.iter().any(Val::has_unknown),
            Val::Map(m) => m.values().any(Val::has_unknown),
            _ => false,
        }
    }

    /// The attribute `name` of an object (Null when absent or not an object).
    pub fn get(&self, name: &str) -> &Val {
        match self {
            Val::Map(m) => m.get(name).unwrap_or(&Val::Null),
            _ => &Val::Null,
        }
    }

    /// True for null.
    pub fn is_null(&self) -> bool {
        matches!(self, Val::Null)
    }

    /// The value as JSON; an unknown value becomes null.
    pub fn to_json(&self) -> Value {
        match self {
            Val::Null | Val::Unknown => Value::Null,
            Val::Bool(b) => Value::Bool(*b),
            Val::Number(n) => Value::Number(n.clone()),
            Val::String(s) => Value::String(s.clone()),
            Val::List(items) => Value::Array(items.iter().map(Val::to_json).collect()),
            Val::Map(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect()),
        }
    }

    /// A known value from JSON.
    pub fn from_json(v: &Value) -> Val {
        match v {
            Value::Null => Val::Null,
            Value::Bool(b) => Val::Bool(*b),
            Value::Number(n) => Val::Number(n.clone()),
            Value::String(s) => Val::String(s.clone()),
            Value::Array(items) => Val::List(items.iter().map(Val::from_json).collect()),
            Value::Object(m) => Val::Map(
                m.iter()
                    .map(|(k, v)| (k.clone(), Val::from_json(v)))
                    .collect(),
            ),
        }
    }
}

/// Decodes cty's msgpack encoding. Empty bytes are null (Terraform sends none for "no value").
pub fn decode(bytes: &[u8]) -> Result<Val, Error> {
    if bytes.is_empty() {
        return Ok(Val::Null);
    }
    let mut cur = Cursor::new(bytes);
    let v = read(&mut cur, 0)?;
    Ok(v)
}

/// Encodes a value as cty's msgpack.
pub fn encode(v: &Val) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    write(&mut out, v);
    out
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::Value(format!("malformed msgpack value: {what}"))
}

fn take<'a>(cur: &mut Cursor<&'a [u8]>, n: usize) -> Result<&'a [u8], Error> {
    let pos = cur.position() as usize;
    let buf: &'a [u8] = cur.get_ref();
    let end = pos
        .checked_add(n)
        .filter(|e| *e <= buf.len())
        .ok_or_else(|| bad("truncated"))?;
    cur.set_position(end as u64);
    Ok(&buf[pos..end])
}

fn be(cur: &mut Cursor<&[u8]>, n: usize) -> Result<u64, Error> {
    Ok(take(cur, n)?
        .iter()
        .fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
}

fn string(cur: &mut Cursor<&[u8]>, len: usize) -> Result<Val, Error> {
    let raw = take(cur, len)?;
    let s = std::str::from_utf8(raw).map_err(|_| bad("a string is not UTF-8"))?;
    Ok(Val::String(s.to_string()))
}

fn read(cur: &mut Cursor<&[u8]>, depth: usize) -> Result<Val, Error> {
    if depth > MAX_DEPTH {
        return Err(bad("nested too deep"));
    }
    let marker = rmp::decode::read_marker(cur).map_err(|_| bad("truncated"))?;
    let int = |n: i64| Val::Number(Number::from(n));
    Ok(match marker {
        Marker::Null => Val::Null,
        Marker::True => Val::Bool(true),
        Marker::False => Val::Bool(false),
        Marker::FixPos(n) => int(i64::from(n)),
        Marker::FixNeg(n) => int(i64::from(n)),
        Marker::U8 => int(be(cur, 1)? as i64),
        Marker::U16 => int(be(cur, 2)? as i64),
        Marker::U32 => int(be(cur, 4)? as i64),
        Marker::U64 => Val::Number(Number::from(be(cur, 8)?)),
        Marker::I8 => int(i64::from(be(cur, 1)? as u8 as i8)),
        Marker::I16 => int(i64::from(be(cur, 2)? as u16 as i16)),
        Marker::I32 => int(i64::from(be(cur, 4)? as u32 as i32)),
        Marker::I64 => int(be(cur, 8)? as i64),
        Marker::F32 => float(f64::from(f32::from_bits(be(cur, 4)? as u32)))?,
        Marker::F64 => float(f64::from_bits(be(cur, 8)?))?,
        Marker::FixStr(n) => string(cur, n as usize)?,
        Marker::Str8 => {
            let n = be(cur, 1)? as usize;
            string(cur, n)?
        }
        Marker::Str16 => {
            let n = be(cur, 2)? as usize;
            string(cur, n)?
        }
        Marker::Str32 => {
            let n = be(cur, 4)? as usize;
            string(cur, n)?
        }
        Marker::FixArray(n) => array(cur, n as usize, depth)?,
        Marker::Array16 => {
            let n = be(cur, 2)? as usize;
            array(cur, n, depth)?
        }
        Marker::Array32 => {
            let n = be(cur, 4)? as usize;
            array(cur, n, depth)?
        }
        Marker::FixMap(n) => map(cur, n as usize, depth)?,
        Marker::Map16 => {
            let n = be(cur, 2)? as usize;
            map(cur, n, depth)?
        }
        Marker::Map32 => {
            let n = be(cur, 4)? as usize;
            map(cur, n, depth)?
        }
        Marker::FixExt1 => ext(cur, 1)?,
        Marker::FixExt2 => ext(cur, 2)?,
        Marker::FixExt4 => ext(cur, 4)?,
        Marker::FixExt8 => ext(cur, 8)?,
        Marker::FixExt16 => ext(cur, 16)?,
        Marker::Ext8 => {
            let n = be(cur, 1)? as usize;
            ext(cur, n)?
        }
        Marker::Ext16 => {
            let n = be(cur, 2)? as usize;
            ext(cur, n)?
        }
        Marker::Ext32 => {
            let n = be(cur, 4)? as usize;
            ext(cur, n)?
        }
        other => return Err(bad(format!("unexpected marker {other:?}"))),
    })
}

fn float(f: f64) -> Result<Val, Error> {
    // Whole floats come back as integers, as cty's own encoder writes them.
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        return Ok(Val::Number(Number::from(f as i64)));
    }
    Number::from_f64(f)
        .map(Val::Number)
        .ok_or_else(|| bad("a number is not finite"))
}

fn array(cur: &mut Cursor<&[u8]>, n: usize, depth: usize) -> Result<Val, Error> {
    let mut items = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        items.push(read(cur, depth + 1)?);
    }
    Ok(Val::List(items))
}

fn map(cur: &mut Cursor<&[u8]>, n: usize, depth: usize) -> Result<Val, Error> {
    let mut m = BTreeMap::new();
    for _ in 0..n {
        let key = match read(cur, depth + 1)? {
            Val::String(s) => s,
            _ => return Err(bad("a map key is not a string")),
        };
        m.insert(key, read(cur, depth + 1)?);
    }
    Ok(Val::Map(m))
}

fn ext(cur: &mut Cursor<&[u8]>, len: usize) -> Result<Val, Error> {
    let kind = be(cur, 1)? as u8 as i8;
    take(cur, len)?;
    // cty's msgpack: 0 is an unknown value, 12 an unknown with refinements (Terraform
    // 1.6+, such as a string's known prefix); both are unknown here.
    if kind == 0 || kind == 12 {
        Ok(Val::Unknown)
    } else {
        Err(bad(format!("unexpected extension type {kind}")))
    }
}

fn write(out: &mut Vec<u8>, v: &Val) {
    // Writes to a Vec cannot fail.
    match v {
        Val::Null => {
            let _ = rmp::encode::write_nil(out);
        }
        Val::Unknown => {
            let _ = rmp::encode::write_ext_meta(out, 0, 0);
        }
        Val::Bool(b) => {
            let _ = rmp::encode::write_bool(out, *b);
        }
        Val::Number(n) => {
            if let Some(i) = n.as_i64() {
                let _ = rmp::encode::write_sint(out, i);
            } else if let Some(u) = n.as_u64() {
                let _ = rmp::encode::write_uint(out, u);
            } else {
                let _ = rmp::encode::write_f64(out, n.as_f64().unwrap_or_default());
            }
        }
        Val::String(s) => {
            let _ = rmp::encode::write_str(out, s);
        }
        Val::List(items) => {
            let _ = rmp::encode::write_array_len(out, items.len() as u32);
            for item in items {
                write(out, item);
            }
        }
        Val::Map(m) => {
            let _ = rmp::encode::write_map_len(out, m.len() as u32);
            for (k, item) in m {
                let _ = rmp::encode::write_str(out, k);
                write(out, item);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn leaf() -> impl Strategy<Value = Val> {
        prop_oneof![
            Just(Val::Null),
            Just(Val::Unknown),
            any::<bool>().prop_map(Val::Bool),
            any::<i64>().prop_map(|n| Val::Number(n.into())),
            (-1.0e9f64..1.0e9).prop_map(|f| float(f).unwrap()),
            ".{0,40}".prop_map(Val::String),
        ]
    }

    fn value() -> impl Strategy<Value = Val> {
        leaf().prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Val::List),
                prop::collection::btree_map(".{0,12}", inner, 0..8).prop_map(Val::Map),
            ]
        })
    }

    proptest! {
        #[test]
        fn msgpack_round_trips(v in value()) {
            prop_assert_eq!(decode(&encode(&v)).unwrap(), v);
        }

        #[test]
        fn a_string_map_stays_a_map(m in prop::collection::btree_map("[a-z]{1,8}", "[a-z]{0,8}", 0..10)) {
            let v = Val::Map(m.iter().map(|(k, v)| (k.clone(), Val::String(v.clone()))).collect());
            let back = decode(&encode(&v)).unwrap();
            prop_assert_eq!(back.to_json(), serde_json::to_value(&m).unwrap());
        }

        #[test]
        fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn cty_unknown_with_refinements_is_unknown() {
        // ext8, length 3, type 0, a refinements payload we skip.
        assert_eq!(
            decode(&[0xc7, 3, 0, 0x81, 0x01, 0xc3]).unwrap(),
            Val::Unknown
        );
        assert_eq!(decode(&[0xd4, 0, 0]).unwrap(), Val::Unknown);
        // ext8, type 12 (Terraform 1.11's refined unknown, as `"env-${count.index}"` sends).
        assert_eq!(
            decode(&[0xc7, 3, 12, 0x81, 0x01, 0xc3]).unwrap(),
            Val::Unknown
        );
        assert_eq!(decode(&[]).unwrap(), Val::Null);
    }
}
