//! Table items in the snapshot's form: DynamoDB's own JSON (`{"S": "x"}`, binary as
//! hex), to and from the SDK's values, and the endpoint rebased when moto moved.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

/// One DynamoDB attribute value, in DynamoDB's own JSON form (`{"S": "x"}`); binary values
/// are hex.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Attr {
    /// A string.
    S(String),
    /// A number, as DynamoDB sends it.
    N(String),
    /// Binary, hex.
    B(String),
    /// A boolean.
    #[serde(rename = "BOOL")]
    Bool(bool),
    /// Null.
    #[serde(rename = "NULL")]
    Null(bool),
    /// A string set.
    #[serde(rename = "SS")]
    Ss(Vec<String>),
    /// A number set.
    #[serde(rename = "NS")]
    Ns(Vec<String>),
    /// A binary set, hex.
    #[serde(rename = "BS")]
    Bs(Vec<String>),
    /// A list.
    L(Vec<Attr>),
    /// A map.
    M(BTreeMap<String, Attr>),
}

/// One table item.
pub type ItemJson = BTreeMap<String, Attr>;

/// An SDK item.
pub type SdkItem = HashMap<String, AttributeValue>;

/// `attr` with every string that is exactly the endpoint `from` (a runner's `s3` state
/// storage `endpoint`, in runner and job items alike) replaced by `to`: moto restarted on
/// another port is still the same local AWS.
pub fn rebase_endpoint(attr: &mut Attr, from: &str, to: &str) {
    match attr {
        Attr::S(s) if s.trim_end_matches('/') == from.trim_end_matches('/') => *s = to.to_string(),
        Attr::L(v) => v.iter_mut().for_each(|a| rebase_endpoint(a, from, to)),
        Attr::M(m) => m.values_mut().for_each(|a| rebase_endpoint(a, from, to)),
        _ => {}
    }
}

/// `value` in the snapshot's form; `None` for a kind of value this SDK does not know.
pub fn attr_from_sdk(value: &AttributeValue) -> Option<Attr> {
    Some(match value {
        AttributeValue::S(s) => Attr::S(s.clone()),
        AttributeValue::N(n) => Attr::N(n.clone()),
        AttributeValue::B(b) => Attr::B(hex(b.as_ref())),
        AttributeValue::Bool(b) => Attr::Bool(*b),
        AttributeValue::Null(n) => Attr::Null(*n),
        AttributeValue::Ss(v) => Attr::Ss(v.clone()),
        AttributeValue::Ns(v) => Attr::Ns(v.clone()),
        AttributeValue::Bs(v) => Attr::Bs(v.iter().map(|b| hex(b.as_ref())).collect()),
        AttributeValue::L(v) => Attr::L(v.iter().map(attr_from_sdk).collect::<Option<_>>()?),
        AttributeValue::M(m) => Attr::M(
            m.iter()
                .map(|(k, v)| Some((k.clone(), attr_from_sdk(v)?)))
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    })
}

/// `attr` as the SDK's value; `None` when a binary value is not hex.
pub fn attr_to_sdk(attr: &Attr) -> Option<AttributeValue> {
    use aws_sdk_dynamodb::primitives::Blob;
    Some(match attr {
        Attr::S(s) => AttributeValue::S(s.clone()),
        Attr::N(n) => AttributeValue::N(n.clone()),
        Attr::B(b) => AttributeValue::B(Blob::new(unhex(b)?)),
        Attr::Bool(b) => AttributeValue::Bool(*b),
        Attr::Null(n) => AttributeValue::Null(*n),
        Attr::Ss(v) => AttributeValue::Ss(v.clone()),
        Attr::Ns(v) => AttributeValue::Ns(v.clone()),
        Attr::Bs(v) => AttributeValue::Bs(
            v.iter()
                .map(|b| unhex(b).map(Blob::new))
                .collect::<Option<_>>()?,
        ),
        Attr::L(v) => AttributeValue::L(v.iter().map(attr_to_sdk).collect::<Option<_>>()?),
        Attr::M(m) => AttributeValue::M(
            m.iter()
                .map(|(k, v)| Some((k.clone(), attr_to_sdk(v)?)))
                .collect::<Option<_>>()?,
        ),
    })
}

/// An SDK item in the snapshot's form (`None` as [`attr_from_sdk`]).
pub fn item_from_sdk(item: &SdkItem) -> Option<ItemJson> {
    item.iter()
        .map(|(k, v)| Some((k.clone(), attr_from_sdk(v)?)))
        .collect()
}

/// A snapshot item as the SDK's (`None` as [`attr_to_sdk`]).
pub fn item_to_sdk(item: &ItemJson) -> Option<SdkItem> {
    item.iter()
        .map(|(k, v)| Some((k.clone(), attr_to_sdk(v)?)))
        .collect()
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
