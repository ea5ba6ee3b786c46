//! Request and file documents, read strictly by their format.
//!
//! - JSON ([`parse_json`]) is read as JSON only.
//! - YAML ([`parse_yaml`]) is read as YAML only, and refuses every tag (`!Ref`,
//!   `!!binary`, `!<tag:…>`): Sortie's documents are plain data.
//! - A document of unknown format ([`parse_any`]) is read as JSON when it is
//!   JSON text, and as YAML otherwise.
//!
//! Both refuse a key given twice in one mapping (serde_json's `Value` would keep
//! the last one silently), a number that no 64-bit integer or finite float holds
//! (`1e400` is neither a string nor infinity), and every such problem names the
//! exact path of the value at fault (`runner_configuration.subnets`, `labels.tier`,
//! `files[2]`), or the line and column of a syntax error.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::problems::{index, join};
use crate::{Problem, ValidationError};

/// The format a document is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON (`application/json` and `+json` types).
    Json,
    /// YAML (`application/yaml`, `application/x-yaml`, `text/yaml`).
    Yaml,
}

/// Parses `text` in `format`; `None` reads JSON text as JSON and anything else as YAML.
pub fn parse(text: &str, format: Option<Format>) -> Result<Value, ValidationError> {
    match format {
        Some(Format::Json) => parse_json(text),
        Some(Format::Yaml) => parse_yaml(text),
        None => parse_any(text),
    }
}

/// Parses a document whose format is not known: JSON when it is JSON text (by its
/// syntax alone), YAML otherwise. The same refusals apply either way.
pub fn parse_any(text: &str) -> Result<Value, ValidationError> {
    not_empty(text)?;
    let is_json = serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok();
    if is_json {
        parse_json(text)
    } else {
        parse_yaml_as(text, "is not valid YAML or JSON")
    }
}

/// Parses a JSON document, refusing duplicate keys and numbers out of range.
pub fn parse_json(text: &str) -> Result<Value, ValidationError> {
    not_empty(text)?;
    let failure = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Node {
        path: String::new(),
        failure: &failure,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    value.map_err(|e| into_error(failure.into_inner(), e.to_string(), "is not valid JSON"))
}

/// Parses a YAML document, refusing tags, duplicate keys and numbers out of range.
pub fn parse_yaml(text: &str) -> Result<Value, ValidationError> {
    not_empty(text)?;
    parse_yaml_as(text, "is not valid YAML")
}

fn parse_yaml_as(text: &str, invalid: &str) -> Result<Value, ValidationError> {
    let failure = RefCell::new(None);
    let value = Node {
        path: String::new(),
        failure: &failure,
    }
    .deserialize(serde_norway::Deserializer::from_str(text))
    .map_err(|e| into_error(failure.into_inner(), e.to_string(), invalid))?;
    // serde_norway does not show standard (`!!binary`) or verbatim tags to a visitor,
    // nor a plain `1e400` (it reads it as a string): one walk over the events does.
    check_yaml_events(text, invalid)?;
    Ok(value)
}

fn not_empty(text: &str) -> Result<(), ValidationError> {
    if text.trim().is_empty() {
        return Err(ValidationError::single("", "the document is empty"));
    }
    Ok(())
}

/// The error for a failed parse: the problem the visitor recorded with its path, or
/// the parser's own message (a syntax error, with its line and column).
fn into_error(failure: Option<Problem>, message: String, invalid: &str) -> ValidationError {
    match failure {
        Some(Problem { path, problem }) if problem.is_empty() => {
            ValidationError::single(path, parser_problem(&message, invalid))
        }
        Some(problem) => ValidationError {
            problems: vec![problem],
        },
        None => ValidationError::single("", format!("{invalid}: {message}")),
    }
}

/// A parser's message for a value at a known path: `number out of range` becomes a
/// sentence about the number.
fn parser_problem(message: &str, invalid: &str) -> String {
    if message.starts_with("number out of range") {
        let at = message
            .find(" at line ")
            .map(|i| &message[i..])
            .unwrap_or("");
        format!("is a number out of range{at}")
    } else {
        format!("{invalid}: {message}")
    }
}

/// One value of the document at `path`. Problems are recorded in `failure` (the first
/// one wins) with their path; an error from the parser itself is recorded with the
/// path of the innermost value being read and an empty problem, filled in later.
struct Node<'a> {
    path: String,
    failure: &'a RefCell<Option<Problem>>,
}

impl Node<'_> {
    fn fail<E: serde::de::Error>(&self, path: String, problem: String) -> E {
        let mut failure = self.failure.borrow_mut();
        let message = format!("{path}: {problem}");
        if failure.is_none() {
            *failure = Some(Problem { path, problem });
        }
        E::custom(message)
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        let failure = self.failure;
        let path = self.path.clone();
        deserializer.deserialize_any(self).inspect_err(|_| {
            let mut failure = failure.borrow_mut();
            if failure.is_none() {
                *failure = Some(Problem {
                    path,
                    problem: String::new(),
                });
            }
        })
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON or YAML value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<Value, E> {
        match i64::try_from(v) {
            Ok(v) => Ok(Value::Number(v.into())),
            Err(_) => Err(self.fail(self.path.clone(), out_of_range())),
        }
    }

    fn visit_u128<E: serde::de::Error>(self, v: u128) -> Result<Value, E> {
        match u64::try_from(v) {
            Ok(v) => Ok(Value::Number(v.into())),
            Err(_) => Err(self.fail(self.path.clone(), out_of_range())),
        }
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        match Number::from_f64(v) {
            Some(n) => Ok(Value::Number(n)),
            None => Err(self.fail(
                self.path.clone(),
                "is not a finite number (infinity and NaN are not accepted)".into(),
            )),
        }
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_bytes<E: serde::de::Error>(self, _: &[u8]) -> Result<Value, E> {
        Err(self.fail(self.path.clone(), "is binary data, not text".into()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let child = Node {
                path: index(&self.path, items.len()),
                failure: self.failure,
            };
            match seq.next_element_seed(child)? {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key_seed(Key {
            path: &self.path,
            node: &self,
        })? {
            let path = join(&self.path, &key);
            if object.contains_key(&key) {
                return Err(self.fail(
                    path,
                    "is given more than once in the same mapping (each key may appear once)".into(),
                ));
            }
            let value = map.next_value_seed(Node {
                path,
                failure: self.failure,
            })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        // serde_norway shows a value with a local tag (`!Ref x`) as an enum variant.
        let (tag, _) = data.variant::<String>()?;
        Err(self.fail(self.path.clone(), tag_problem(&format!("!{tag}"))))
    }
}

fn out_of_range() -> String {
    "is a number out of range (integers must fit in 64 bits)".into()
}

fn tag_problem(tag: &str) -> String {
    format!("carries the YAML tag `{tag}`; tags are not accepted, write plain values")
}

/// A mapping key: a string (a YAML number or boolean key counts as its text).
struct Key<'a, 'b> {
    path: &'a str,
    node: &'a Node<'b>,
}

impl<'de> DeserializeSeed<'de> for Key<'_, '_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key<'_, '_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_str<E>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_string<E>(self, v: String) -> Result<String, E> {
        Ok(v)
    }

    fn visit_bool<E>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_i64<E>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_u64<E>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_f64<E>(self, v: f64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<String, E> {
        Err(self.refuse("null"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<String, A::Error> {
        Err(self.refuse("a list"))
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<String, A::Error> {
        Err(self.refuse("a mapping"))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<String, A::Error> {
        let (tag, _) = data.variant::<String>()?;
        Err(self
            .node
            .fail(self.path.to_string(), tag_problem(&format!("!{tag}"))))
    }
}

impl Key<'_, '_> {
    fn refuse<E: serde::de::Error>(&self, what: &str) -> E {
        self.node.fail(
            self.path.to_string(),
            format!("has a key that is {what}; keys must be strings"),
        )
    }
}

/// One open collection while walking YAML events.
enum Open {
    /// A mapping: the next node is a key when `key` is `None`.
    Map { path: String, key: Option<String> },
    /// A sequence and the index of its next item.
    Seq { path: String, next: usize },
}

/// Walks the YAML events once, refusing any tag and any plain scalar that reads as
/// a number no float holds (`1e400`), at its path. A document the walker cannot
/// read is refused too, though serde_norway read it: the stricter reading wins.
fn check_yaml_events(text: &str, invalid: &str) -> Result<(), ValidationError> {
    use saphyr_parser::{Event, Parser, ScalarStyle};

    let mut open: Vec<Open> = Vec::new();
    for event in Parser::new_from_str(text) {
        let (event, span) =
            event.map_err(|e| ValidationError::single("", format!("{invalid}: {}", e.info())))?;
        let (tag, scalar) = match &event {
            Event::Scalar(value, style, _, tag) => (tag.as_deref(), Some((value, *style))),
            Event::SequenceStart(_, tag) | Event::MappingStart(_, tag) => (tag.as_deref(), None),
            Event::Alias(_) => (None, None),
            Event::SequenceEnd | Event::MappingEnd => {
                open.pop();
                finish_node(&mut open, None);
                continue;
            }
            _ => continue,
        };
        let path = node_path(&open, scalar.map(|(v, _)| v.as_ref()));
        if let Some(tag) = tag {
            let written = written_tag(&tag.handle, &tag.suffix);
            return Err(ValidationError::single(path, tag_problem(&written)));
        }
        if let Some((value, ScalarStyle::Plain)) = scalar {
            if is_unrepresentable_number(value) {
                let line = span.start.line();
                return Err(ValidationError::single(
                    path,
                    format!("is a number out of range (at line {line})"),
                ));
            }
        }
        match &event {
            Event::SequenceStart(..) => open.push(Open::Seq { path, next: 0 }),
            Event::MappingStart(..) => open.push(Open::Map { path, key: None }),
            _ => finish_node(&mut open, scalar.map(|(v, _)| v.to_string())),
        }
    }
    Ok(())
}

/// A resolved tag as a person would write it: `!!binary`, `!Ref`, `!<tag:example.com,2000:x>`.
fn written_tag(handle: &str, suffix: &str) -> String {
    let full = format!("{handle}{suffix}");
    if let Some(core) = full.strip_prefix("tag:yaml.org,2002:") {
        format!("!!{core}")
    } else if handle.starts_with('!') {
        full
    } else {
        format!("!<{full}>")
    }
}

/// The path of the next node in the innermost open collection. A key's path is the
/// path its value will have.
fn node_path(open: &[Open], scalar: Option<&str>) -> String {
    match open.last() {
        None => String::new(),
        Some(Open::Seq { path, next }) => index(path, *next),
        Some(Open::Map { path, key: Some(k) }) => join(path, k),
        Some(Open::Map { path, key: None }) => join(path, scalar.unwrap_or("?")),
    }
}

/// Records that a node ended in the innermost open collection: a key (its text, if
/// a scalar) or a value.
fn finish_node(open: &mut [Open], scalar: Option<String>) {
    match open.last_mut() {
        Some(Open::Seq { next, .. }) => *next += 1,
        Some(Open::Map { key, .. }) => {
            *key = match key {
                None => Some(scalar.unwrap_or_else(|| "?".into())),
                Some(_) => None,
            }
        }
        None => {}
    }
}

/// A plain scalar that reads as a decimal number but overflows every float (`1e400`,
/// `-2e999`); `.inf` and `inf` are spelled out, not numbers out of range.
fn is_unrepresentable_number(value: &str) -> bool {
    let digits = value.strip_prefix(['+', '-']).unwrap_or(value);
    digits.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && digits.bytes().any(|b| b.is_ascii_digit())
        && value.parse::<f64>().is_ok_and(|f| f.is_infinite())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(r: Result<Value, ValidationError>) -> (String, String) {
        let e = r.unwrap_err();
        (e.problems[0].path.clone(), e.problems[0].problem.clone())
    }

    #[test]
    fn duplicate_keys_are_refused_at_their_path_in_json_and_yaml() {
        let (path, p) = problem(parse_json(
            r#"{"runner_configuration": {"subnets": ["a"], "subnets": ["b"]}}"#,
        ));
        assert_eq!(path, "runner_configuration.subnets", "{p}");
        assert!(p.contains("more than once"), "{p}");
        let (path, _) = problem(parse_yaml("labels:\n  tier: a\n  tier: b\n"));
        assert_eq!(path, "labels.tier");
        let (path, _) = problem(parse_any("{\"a\": [{\"x\": 1, \"x\": 2}]}"));
        assert_eq!(path, "a[0].x");
    }

    #[test]
    fn every_yaml_tag_is_refused_at_its_path() {
        for (doc, path, tag) in [
            ("a: !!binary aGVsbG8=", "a", "!!binary"),
            ("a: {b: !Ref x}", "a.b", "!Ref"),
            ("a: [1, !!str 2]", "a[1]", "!!str"),
            ("a: !<tag:yaml.org,2002:str> x", "a", "!!str"),
            (
                "a: !<tag:example.com,2000:x> x",
                "a",
                "!<tag:example.com,2000:x>",
            ),
            ("!!map {a: 1}", "", "!!map"),
            ("a:\n  - b: !!set {x}", "a[0].b", "!!set"),
        ] {
            let (got, p) = problem(parse_yaml(doc));
            assert_eq!(got, path, "{doc}: {p}");
            assert!(p.contains(tag), "{doc}: {p}");
        }
        // A `!` inside a string is no tag.
        assert_eq!(
            parse_yaml("a: \"!!binary x\"\nb: 'x !y'\nc: |\n  !z\n").unwrap()["a"],
            "!!binary x"
        );
    }

    #[test]
    fn numbers_out_of_range_name_their_path() {
        for (doc, path) in [
            (r#"{"a": {"timeout_seconds": 1e400}}"#, "a.timeout_seconds"),
            ("a:\n  timeout_seconds: 1e400\n", "a.timeout_seconds"),
            ("a: [1, 99999999999999999999]", "a[1]"),
            ("a: .inf", "a"),
            ("a: -1e999", "a"),
        ] {
            let (got, p) = problem(parse(doc, None));
            assert_eq!(got, path, "{doc}: {p}");
            assert!(p.contains("number"), "{doc}: {p}");
        }
        assert_eq!(parse_yaml("a: 1e300").unwrap()["a"], 1e300);
        assert_eq!(parse_yaml("a: inf").unwrap()["a"], "inf");
        assert_eq!(parse_yaml("a: '1e400'").unwrap()["a"], "1e400");
    }

    #[test]
    fn formats_are_read_strictly() {
        assert!(parse_json("a: 1").is_err());
        assert_eq!(parse_yaml("{\"a\": 1}").unwrap()["a"], 1);
        assert_eq!(parse_any("a: 1").unwrap()["a"], 1);
        assert_eq!(parse_any("{\"a\": [1]}").unwrap()["a"][0], 1);
        assert_eq!(parse_any("{a: 1}").unwrap()["a"], 1);
        let (path, p) = problem(parse_json("{\"a\": {\"b\": 1,}}"));
        assert_eq!(path, "a", "{p}");
        assert!(p.starts_with("is not valid JSON"), "{p}");
        assert_eq!(parse_yaml("{1: x, true: y}").unwrap()["1"], "x");
        let (path, _) = problem(parse_yaml("a: {[1]: x}"));
        assert_eq!(path, "a");
        let (_, p) = problem(parse_any("a: [unclosed"));
        assert!(p.contains("not valid YAML or JSON"), "{p}");
    }
}
