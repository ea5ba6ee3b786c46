//! Typed models, as the scaffolding framework's: one struct per resource, nested block and
//! data source, whose fields are its attributes. The [`model!`] macro writes the struct, its
//! serde form (the state's JSON object, every attribute present, null when unset) and its
//! schema [`Block`] from one table, so each attribute is named once.

use std::collections::{BTreeMap, BTreeSet};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Number, Value};

use crate::error::Error;
use crate::schema::{Block, Ty};

/// A Rust type an attribute holds, and its Terraform type.
pub trait FieldType {
    /// The Terraform type.
    fn ty() -> Ty;
}

impl FieldType for String {
    fn ty() -> Ty {
        Ty::String
    }
}

impl FieldType for bool {
    fn ty() -> Ty {
        Ty::Bool
    }
}

impl FieldType for Number {
    fn ty() -> Ty {
        Ty::Number
    }
}

impl FieldType for u64 {
    fn ty() -> Ty {
        Ty::Number
    }
}

impl<T: FieldType> FieldType for Vec<T> {
    fn ty() -> Ty {
        Ty::List(Box::new(T::ty()))
    }
}

impl<T: FieldType> FieldType for BTreeSet<T> {
    fn ty() -> Ty {
        Ty::Set(Box::new(T::ty()))
    }
}

impl<T: FieldType> FieldType for BTreeMap<String, T> {
    fn ty() -> Ty {
        Ty::Map(Box::new(T::ty()))
    }
}

/// A typed model: a block's attributes (and nested blocks) as `Option` fields, read from
/// and written to the JSON object the service decodes from cty.
pub trait Model: Serialize + DeserializeOwned + Default + Send + Sync + 'static {
    /// Its schema, from the same table as its fields.
    fn block() -> Block;

    /// The model with every nested block present (each `filled` too), so that its JSON
    /// names every field serde knows (the tests compare them with the schema).
    #[cfg(test)]
    fn filled() -> Self;

    /// The model of a state or configuration (null is every attribute null).
    fn from_json(v: &Value) -> Result<Self, Error> {
        if v.is_null() {
            return Ok(Self::default());
        }
        serde_json::from_value(v.clone())
            .map_err(|e| Error::Value(format!("a value does not fit its schema: {e}")))
    }

    /// The model as the state's JSON: every attribute, null when unset.
    fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a model's fields are JSON")
    }
}

/// An attribute's name from its field's (`r#type` is `type`).
pub fn name(field: &'static str) -> &'static str {
    field.trim_start_matches("r#")
}

/// A value of the API's answer as a field: `None` when null or not of the field's type.
pub fn field<T: DeserializeOwned>(v: &Value) -> Option<T> {
    if v.is_null() {
        return None;
    }
    serde_json::from_value(v.clone()).ok()
}

/// `v`'s object without its null members (an API body leaves out what is unset).
pub fn set_only(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m.into_iter().filter(|(_, v)| !v.is_null()).collect(),
        _ => serde_json::Map::new(),
    }
}

/// A model: the struct, its serde form and its schema from one table. Each attribute is
/// `name: Type [Mode, builder(args)...] "description",` (the field is `Option<Type>`; the
/// builders are [`crate::schema::Attr`]'s: `force_new`, `sensitive`, `volatile`,
/// `check(f)`); nested blocks (`Option` of another model) follow in `blocks { name: Type, }`.
macro_rules! model {
    (
        $(#[$meta:meta])*
        $vis:vis struct $model:ident ($description:expr) {
            $(
                $field:ident : $ty:ty [$mode:ident $(, $builder:ident $(($arg:expr))?)*]
                $desc:literal,
            )*
        }
        $(blocks { $($block:ident : $bty:ty,)* })?
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(default)]
        $vis struct $model {
            $(
                #[doc = $desc]
                pub $field: Option<$ty>,
            )*
            $($(
                #[doc = concat!("The `", stringify!($block), "` block.")]
                pub $block: Option<$bty>,
            )*)?
        }

        impl $crate::model::Model for $model {
            fn block() -> $crate::schema::Block {
                $crate::schema::Block {
                    attrs: vec![$(
                        $crate::schema::attr(
                            $crate::model::name(stringify!($field)),
                            <$ty as $crate::model::FieldType>::ty(),
                            $crate::schema::Mode::$mode,
                            $desc,
                        )$(.$builder($($arg)?))*,
                    )*],
                    blocks: vec![$($(
                        $crate::schema::Nested {
                            name: $crate::model::name(stringify!($block)),
                            block: <$bty as $crate::model::Model>::block(),
                        },
                    )*)?],
                    description: $description,
                }
            }

            #[cfg(test)]
            fn filled() -> Self {
                Self {
                    $($($block: Some(<$bty as $crate::model::Model>::filled()),)*)?
                    ..Default::default()
                }
            }
        }
    };
}

pub(crate) use model;
