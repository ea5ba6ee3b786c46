//! DynamoDB: item size, nesting, names and numbers; Sortie's item budgets.

use super::*;

// ---------------------------------------------------------------------------------------
// DynamoDB
// ---------------------------------------------------------------------------------------

/// Largest DynamoDB item: 400 KB, attribute names and values included.
///
/// Source: <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-items>
/// ("The maximum item size in DynamoDB is 400 KB, which includes both attribute name
/// binary length (UTF-8 length) and attribute value lengths"). Read as 400 × 1024 bytes;
/// [`dynamodb_item_size`] estimates conservatively, so the reading does not matter
/// within the headroom below.
pub const DYNAMODB_ITEM_MAX: usize = 400 * 1024;

/// Deepest nesting of maps and lists in an attribute: 32 levels.
///
/// Source: <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-attributes>
/// ("DynamoDB supports nested attributes up to 32 levels deep"). A top-level map or list
/// attribute is counted as level 1 (the stricter reading).
pub const DYNAMODB_NESTING_MAX: usize = 32;

/// Longest attribute name, map keys included: 64 KB of UTF-8, and at least 1 byte.
///
/// Source: <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-naming-rules>
/// ("Attribute names must be at least one character long and less than 64 KB").
pub const DYNAMODB_NAME_MAX: usize = 65535;

/// Longest partition key value: 2,048 bytes (a string key's UTF-8 bytes).
///
/// Source: <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-partition-sort-keys>
/// ("The minimum length of a partition key value is 1 byte. The maximum length is 2048
/// bytes."). A longer key is a `ValidationException`: a 5xx unless the input that builds
/// it is refused first, which every key-building field does (see `docs/decisions/limits.md`).
pub const DYNAMODB_PARTITION_KEY_MAX: usize = 2048;

/// Longest sort key value: 1,024 bytes (source as [`DYNAMODB_PARTITION_KEY_MAX`]: "The
/// maximum length is 1024 bytes").
pub const DYNAMODB_SORT_KEY_MAX: usize = 1024;

/// Largest magnitude of a DynamoDB number: below 10^126.
///
/// Source: <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html#HowItWorks.DataTypes.Number>
/// (positive range 1E-130 to 9.9999999999999999999999999999999999999E+125).
pub const DYNAMODB_NUMBER_MAX: f64 = 1e126;
/// Smallest non-zero magnitude of a DynamoDB number: 10^-130 (source as [`DYNAMODB_NUMBER_MAX`]).
pub const DYNAMODB_NUMBER_MIN: f64 = 1e-130;

/// The levels of the stored job item around each job variable: the `variables` map is a
/// top-level attribute of the job item (the job is flattened into it, see
/// `sortie-store`'s `JobItem`), so a variable's value sits one level down.
pub const JOB_VARIABLE_ENCLOSING_LEVELS: usize = 1;

/// The levels around an `eks` runner's `pod_template` in the deepest item that holds it:
/// a job item's `runner_spec` snapshot → `runner_configuration` → `job` → `pod_template`.
pub const POD_TEMPLATE_ENCLOSING_LEVELS: usize = 3;

/// Sortie's budget for a runner's specification in an item, by [`dynamodb_item_size`]:
/// 64 KiB. A job item carries a snapshot of it, so it must leave room for the job.
pub const RUNNER_SPEC_ITEM_MAX: usize = 64 * 1024;

/// Headroom in a job item for everything but the request and the runner snapshot: keys,
/// GSI keys, ids, the transitions, the summary, the task reference: 64 KiB.
pub const JOB_RECORD_RESERVE: usize = 64 * 1024;

/// Sortie's budget for a job request in its job item, by [`dynamodb_item_size`]:
/// [`DYNAMODB_ITEM_MAX`] − [`RUNNER_SPEC_ITEM_MAX`] − [`JOB_RECORD_RESERVE`] = 272 KiB.
pub const JOB_REQUEST_ITEM_MAX: usize =
    DYNAMODB_ITEM_MAX - RUNNER_SPEC_ITEM_MAX - JOB_RECORD_RESERVE;

/// The size DynamoDB counts for `item`, estimated conservatively by AWS's item-size rules:
/// for an object, the sum of each attribute's name (UTF-8 bytes) and value size; for
/// anything else, the size of that one value.
///
/// Value sizes (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html>):
/// a string is its UTF-8 bytes; a number 1 byte per two digits plus 1 (every digit of its
/// decimal form is counted, so leading and trailing zeros only make the estimate larger);
/// null and booleans 1 byte; a list or map 3 bytes plus, per element, 1 byte, the
/// element's size and (for a map) its key's bytes.
///
/// The store checks the real item (keys and all) with this before it writes.
pub fn dynamodb_item_size(item: &Value) -> usize {
    match item {
        Value::Object(m) => m.iter().map(|(k, v)| k.len() + value_size(v)).sum(),
        other => value_size(other),
    }
}

fn value_size(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) => 1,
        Value::String(s) => s.len(),
        Value::Number(n) => {
            let text = n.to_string();
            let mantissa = text.split(['e', 'E']).next().unwrap_or_default();
            let digits = mantissa.bytes().filter(u8::is_ascii_digit).count();
            digits.div_ceil(2) + 1
        }
        Value::Array(a) => 3 + a.iter().map(|e| 1 + value_size(e)).sum::<usize>(),
        Value::Object(m) => {
            3 + m
                .iter()
                .map(|(k, e)| 1 + k.len() + value_size(e))
                .sum::<usize>()
        }
    }
}

/// How many levels of maps and lists `v` has: 0 for a scalar, 1 for a flat map or list.
pub fn nesting_depth(v: &Value) -> usize {
    // Iterative, so that a hostile document cannot overflow the stack here.
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, above)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(m) => Box::new(m.values()),
            _ => continue,
        };
        deepest = deepest.max(above + 1);
        stack.extend(children.map(|c| (c, above + 1)));
    }
    deepest
}

/// Checks a free-form value that will be stored in DynamoDB `enclosing` levels down:
/// its nesting (reported at `path`), every map key (non-empty, at most
/// [`DYNAMODB_NAME_MAX`] bytes, reported at the key's path) and every number's range.
pub fn check_dynamodb_value(
    v: &Value,
    path: &str,
    enclosing: usize,
    p: &mut crate::problems::Problems,
) {
    let depth = nesting_depth(v);
    if depth + enclosing > DYNAMODB_NESTING_MAX {
        p.push(
            path,
            format!(
                "is nested {depth} levels deep; stored with the {enclosing} level(s) around it, that is over DynamoDB's {DYNAMODB_NESTING_MAX}",
            ),
        );
        // Keys and numbers below are still checked, but not past the limit.
    }
    let mut stack = vec![(v, path.to_string(), 0usize)];
    while let Some((v, path, level)) = stack.pop() {
        if level > DYNAMODB_NESTING_MAX {
            continue;
        }
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    let child_path = crate::problems::key_path(&path, k);
                    if k.is_empty() {
                        p.push(
                            &child_path,
                            "a map key must not be empty (DynamoDB refuses empty attribute names)",
                        );
                    } else if k.len() > DYNAMODB_NAME_MAX {
                        p.push(
                            &child_path,
                            format!(
                                "a map key must be at most {DYNAMODB_NAME_MAX} bytes (DynamoDB)"
                            ),
                        );
                    }
                    stack.push((child, child_path, level + 1));
                }
            }
            Value::Array(a) => {
                for (i, child) in a.iter().enumerate() {
                    stack.push((child, crate::problems::index(&path, i), level + 1));
                }
            }
            Value::Number(n) => {
                if let Some(x) = n.as_f64() {
                    let m = x.abs();
                    if m >= DYNAMODB_NUMBER_MAX || (m != 0.0 && m < DYNAMODB_NUMBER_MIN) {
                        p.push(
                            &path,
                            "is outside DynamoDB's number range (1e-130 to 1e126 in magnitude)",
                        );
                    }
                }
            }
            _ => {}
        }
    }
}
