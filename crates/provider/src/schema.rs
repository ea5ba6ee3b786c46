//! Schemas as data: the types and blocks of every resource and data source, their protocol
//! form, and the pure rules the provider plans with (conforming a value to its block, the
//! planned state, the attributes whose change needs a replacement).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::cty::Val;
use crate::error::Error;
use crate::proto::tfplugin6 as pb;

/// An attribute's type.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    /// `string`.
    String,
    /// `number`.
    Number,
    /// `bool`.
    Bool,
    /// `list(T)`.
    List(Box<Ty>),
    /// `set(T)`.
    Set(Box<Ty>),
    /// `map(T)`.
    Map(Box<Ty>),
}

impl Ty {
    /// The type in cty's JSON type notation (the schema's `type` bytes).
    pub fn to_json(&self) -> Value {
        match self {
            Ty::String => json!("string"),
            Ty::Number => json!("number"),
            Ty::Bool => json!("bool"),
            Ty::List(t) => json!(["list", t.to_json()]),
            Ty::Set(t) => json!(["set", t.to_json()]),
            Ty::Map(t) => json!(["map", t.to_json()]),
        }
    }
}

/// How an attribute is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The configuration must set it.
    Required,
    /// The configuration may set it; absent is null.
    Optional,
    /// The configuration may set it; absent, Sortie picks it (kept from the prior state).
    OptionalComputed,
    /// Only Sortie sets it.
    Computed,
}

/// A check of a string attribute's known value: why it is wrong, or `Ok` (the checks are
/// sortie-core's rules, in `crate::checks`).
pub type Check = fn(&str) -> Result<(), String>;

/// One attribute.
#[derive(Debug, Clone)]
pub struct Attr {
    /// Its name.
    pub name: &'static str,
    /// Its type.
    pub ty: Ty,
    /// How it is set.
    pub mode: Mode,
    /// Hidden in plans and output.
    pub sensitive: bool,
    /// A change replaces the object (the API cannot change it in place).
    pub force_new: bool,
    /// A computed attribute that any in-place update changes (the version, say).
    pub volatile: bool,
    /// What it is.
    pub description: &'static str,
    /// Checks its value at validation, before the API sees it.
    pub check: Option<Check>,
}

/// An attribute, `mode` and described; refine with the builder methods.
pub fn attr(name: &'static str, ty: Ty, mode: Mode, description: &'static str) -> Attr {
    Attr {
        name,
        ty,
        mode,
        sensitive: false,
        force_new: false,
        volatile: false,
        description,
        check: None,
    }
}

impl Attr {
    /// Marks it as replacing the object when changed.
    pub fn force_new(mut self) -> Self {
        self.force_new = true;
        self
    }

    /// Marks it as sensitive.
    pub fn sensitive(mut self) -> Self {
        self.sensitive = true;
        self
    }

    /// Marks it as changed by every update.
    pub fn volatile(mut self) -> Self {
        self.volatile = true;
        self
    }

    /// Checks its value with `check` at validation.
    pub fn check(mut self, check: Check) -> Self {
        self.check = Some(check);
        self
    }
}

/// A nested block: at most one (`NestingSingle`).
#[derive(Debug, Clone)]
pub struct Nested {
    /// The block's name.
    pub name: &'static str,
    /// Its content.
    pub block: Block,
}

/// A block: attributes and single nested blocks.
#[derive(Debug, Clone, Default)]
pub struct Block {
    /// Its attributes.
    pub attrs: Vec<Attr>,
    /// Its nested blocks.
    pub blocks: Vec<Nested>,
    /// What it is.
    pub description: &'static str,
}

impl Block {
    /// The block in the protocol's form.
    pub fn to_proto(&self) -> pb::schema::Block {
        pb::schema::Block {
            version: 0,
            attributes: self
                .attrs
                .iter()
                .map(|a| pb::schema::Attribute {
                    name: a.name.to_string(),
                    r#type: a.ty.to_json().to_string().into_bytes(),
                    nested_type: None,
                    description: a.description.to_string(),
                    required: a.mode == Mode::Required,
                    optional: matches!(a.mode, Mode::Optional | Mode::OptionalComputed),
                    computed: matches!(a.mode, Mode::Computed | Mode::OptionalComputed),
                    sensitive: a.sensitive,
                    description_kind: 0,
                    deprecated: false,
                })
                .collect(),
            block_types: self
                .blocks
                .iter()
                .map(|n| pb::schema::NestedBlock {
                    type_name: n.name.to_string(),
                    block: Some(n.block.to_proto()),
                    nesting: pb::schema::nested_block::NestingMode::Single as i32,
                    min_items: 0,
                    max_items: 0,
                })
                .collect(),
            description: self.description.to_string(),
            description_kind: 0,
            deprecated: false,
        }
    }

    /// Runs every attribute's check on its value in `config` (a JSON object conformed to
    /// the block): the first failure, on the attribute (dotted through nested blocks).
    pub fn check(&self, config: &Value) -> Result<(), Error> {
        self.check_at("", config)
    }

    fn check_at(&self, prefix: &str, config: &Value) -> Result<(), Error> {
        for a in &self.attrs {
            let (Some(check), Some(value)) = (a.check, config[a.name].as_str()) else {
                continue;
            };
            check(value).map_err(|problem| Error::Invalid {
                attribute: format!("{prefix}{}", a.name),
                problem,
            })?;
        }
        for n in &self.blocks {
            n.block
                .check_at(&format!("{prefix}{}.", n.name), &config[n.name])?;
        }
        Ok(())
    }

    /// The schema (version 0) in the protocol's form.
    pub fn schema(&self) -> pb::Schema {
        pb::Schema {
            version: 0,
            block: Some(self.to_proto()),
        }
    }

    /// `v` with exactly this block's attributes and blocks: missing ones null, others
    /// dropped, nested blocks conformed too. A null `v` stays null.
    pub fn conform(&self, v: &Val) -> Val {
        if v.is_null() || matches!(v, Val::Unknown) {
            return v.clone();
        }
        let mut out = BTreeMap::new();
        for a in &self.attrs {
            out.insert(a.name.to_string(), v.get(a.name).clone());
        }
        for n in &self.blocks {
            out.insert(n.name.to_string(), n.block.conform(v.get(n.name)));
        }
        Val::Map(out)
    }

    /// The planned state from the configuration and the prior state (null on create): the
    /// configuration's values; where it sets none, a computed attribute keeps its prior
    /// value (unknown on create), and a volatile one is unknown whenever anything changes.
    pub fn plan(&self, config: &Val, prior: &Val) -> Val {
        let planned = self.plan_values(config, prior);
        if !prior.is_null() && &planned != prior {
            self.unknown_volatile(planned)
        } else {
            planned
        }
    }

    fn plan_values(&self, config: &Val, prior: &Val) -> Val {
        if config.is_null() {
            return Val::Null;
        }
        let mut out = BTreeMap::new();
        for a in &self.attrs {
            let c = config.get(a.name);
            let v = match a.mode {
                Mode::Computed => prior_or_unknown(prior, a.name),
                Mode::OptionalComputed if c.is_null() => prior_or_unknown(prior, a.name),
                _ => c.clone(),
            };
            out.insert(a.name.to_string(), v);
        }
        for n in &self.blocks {
            let v = n.block.plan_values(config.get(n.name), prior.get(n.name));
            out.insert(n.name.to_string(), v);
        }
        Val::Map(out)
    }

    fn unknown_volatile(&self, planned: Val) -> Val {
        let Val::Map(mut m) = planned else {
            return planned;
        };
        for a in self.attrs.iter().filter(|a| a.volatile) {
            m.insert(a.name.to_string(), Val::Unknown);
        }
        Val::Map(m)
    }

    /// The force-new attributes whose planned value differs from the prior one (none on
    /// create or destroy).
    pub fn requires_replace(&self, prior: &Val, planned: &Val) -> Vec<&'static str> {
        if prior.is_null() || planned.is_null() {
            return Vec::new();
        }
        self.attrs
            .iter()
            .filter(|a| a.force_new && prior.get(a.name) != planned.get(a.name))
            .map(|a| a.name)
            .collect()
    }

    /// The API's answer as state, each value settled against `reference` (the planned or
    /// prior state): where the reference holds null and the API an empty value (no
    /// labels, no description, false), the state holds null, so an attribute the
    /// configuration leaves out never shows as a change.
    pub fn settle(&self, api: &Val, reference: &Val) -> Val {
        if api.is_null() {
            return Val::Null;
        }
        let mut out = BTreeMap::new();
        for a in &self.attrs {
            let v = api.get(a.name);
            let r = reference.get(a.name);
            let keep_null = r.is_null() && a.mode == Mode::Optional && is_empty(v);
            out.insert(
                a.name.to_string(),
                if keep_null { Val::Null } else { v.clone() },
            );
        }
        for n in &self.blocks {
            let r = reference.get(n.name);
            let v = n.block.settle(api.get(n.name), r);
            out.insert(n.name.to_string(), v);
        }
        Val::Map(out)
    }
}

fn prior_or_unknown(prior: &Val, name: &str) -> Val {
    if prior.is_null() {
        Val::Unknown
    } else {
        prior.get(name).clone()
    }
}

/// Empty as the API writes "nothing": null, "", false, an empty list or map.
fn is_empty(v: &Val) -> bool {
    match v {
        Val::Null => true,
        Val::String(s) => s.is_empty(),
        Val::Bool(b) => !b,
        Val::List(items) => items.is_empty(),
        Val::Map(m) => m.is_empty(),
        _ => false,
    }
}

/// A path to one attribute, for a diagnostic or `requires_replace`: `a.b` steps through
/// nested blocks, a trailing `.key` of a map attribute is an element key.
pub fn path(dotted: &str) -> pb::AttributePath {
    use pb::attribute_path::step::Selector;
    pb::AttributePath {
        steps: dotted
            .split('.')
            .filter(|s| !s.is_empty())
            .map(|s| pb::attribute_path::Step {
                selector: Some(match s.parse::<i64>() {
                    Ok(i) => Selector::ElementKeyInt(i),
                    Err(_) => Selector::AttributeName(s.to_string()),
                }),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn block() -> Block {
        Block {
            attrs: vec![
                attr("id", Ty::String, Mode::Computed, "id"),
                attr("name", Ty::String, Mode::Required, "name").force_new(),
                attr(
                    "labels",
                    Ty::Map(Box::new(Ty::String)),
                    Mode::Optional,
                    "labels",
                ),
                attr("timeout", Ty::Number, Mode::OptionalComputed, "t"),
                attr("version", Ty::Number, Mode::Computed, "v").volatile(),
            ],
            blocks: vec![],
            description: "test",
        }
    }

    fn obj(pairs: &[(&str, Val)]) -> Val {
        Val::Map(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    fn s(v: &str) -> Val {
        Val::String(v.into())
    }

    #[test]
    fn create_plans_computed_as_unknown() {
        let b = block();
        let planned = b.plan(&b.conform(&obj(&[("name", s("a"))])), &Val::Null);
        assert_eq!(planned.get("id"), &Val::Unknown);
        assert_eq!(planned.get("timeout"), &Val::Unknown);
        assert_eq!(planned.get("labels"), &Val::Null);
        assert!(b.requires_replace(&Val::Null, &planned).is_empty());
    }

    proptest! {
        #[test]
        fn unchanged_config_plans_the_prior_state(
            name in "[a-z]{1,8}",
            labels in prop::collection::btree_map("[a-z]{1,5}", "[a-z]{0,5}", 0..5),
            timeout in 1i64..10_000,
        ) {
            let b = block();
            let lab = Val::Map(labels.iter().map(|(k, v)| (k.clone(), s(v))).collect());
            let prior = obj(&[("id", s(&name)), ("name", s(&name)), ("labels", lab.clone()),
                ("timeout", Val::Number(timeout.into())), ("version", Val::Number(3.into()))]);
            let config = b.conform(&obj(&[("name", s(&name)), ("labels", lab)]));
            let planned = b.plan(&config, &prior);
            prop_assert_eq!(&planned, &prior);
            prop_assert!(b.requires_replace(&prior, &planned).is_empty());
        }

        #[test]
        fn a_changed_force_new_attribute_requires_replace(a in "[a-z]{1,8}", c in "[A-Z]{1,8}") {
            let b = block();
            let prior = b.conform(&obj(&[("id", s(&a)), ("name", s(&a)), ("version", Val::Number(1.into()))]));
            let planned = b.plan(&b.conform(&obj(&[("name", s(&c))])), &prior);
            prop_assert_eq!(b.requires_replace(&prior, &planned), vec!["name"]);
            prop_assert_eq!(planned.get("version"), &Val::Unknown);
        }
    }

    #[test]
    fn settle_keeps_an_absent_optional_null() {
        let b = block();
        let api = obj(&[("name", s("a")), ("labels", Val::Map(BTreeMap::new()))]);
        let settled = b.settle(&api, &b.conform(&obj(&[("name", s("a"))])));
        assert_eq!(settled.get("labels"), &Val::Null);
        let with = obj(&[("labels", Val::Map(BTreeMap::new()))]);
        assert_eq!(
            b.settle(&api, &with).get("labels"),
            &Val::Map(BTreeMap::new())
        );
    }
}
