//! Query strings and paging: `per_page` and `page`, and the `Link` header GitHub sends.

use serde_json::{json, Value};

use super::Reply;
use crate::github::rules;

/// The query's pairs, values percent-decoded.
pub(super) fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// One page of `items` and its `Link` header: `per_page` clamped to 1..=100 (30 when
/// absent), `page` from 1.
fn page_of<T: Clone>(
    base_url: &str,
    path: &str,
    query: Option<&str>,
    items: &[T],
) -> (Vec<T>, Option<String>) {
    let raw: Vec<(String, String)> = query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.to_string())
        })
        .collect();
    let get = |name: &str| {
        raw.iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.parse::<usize>().ok())
    };
    let per_page = match get("per_page") {
        Some(0) | None => rules::DEFAULT_PER_PAGE,
        Some(n) => n.min(rules::MAX_PER_PAGE),
    };
    let page = get("page").unwrap_or(1).max(1);
    let last = items.len().div_ceil(per_page).max(1);
    let start = (page - 1).saturating_mul(per_page).min(items.len());
    let end = (start + per_page).min(items.len());
    let url = |n: usize| {
        let mut pairs: Vec<String> = raw
            .iter()
            .filter(|(k, _)| k != "page" && k != "per_page")
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        pairs.push(format!("per_page={per_page}"));
        pairs.push(format!("page={n}"));
        format!("<{base_url}{path}?{}>", pairs.join("&"))
    };
    let mut links = Vec::new();
    if page < last {
        links.push(format!("{}; rel=\"next\"", url(page + 1)));
        links.push(format!("{}; rel=\"last\"", url(last)));
    }
    if page > 1 {
        links.push(format!("{}; rel=\"first\"", url(1)));
        links.push(format!("{}; rel=\"prev\"", url((page - 1).min(last))));
    }
    let link = (!links.is_empty()).then(|| links.join(", "));
    (items[start..end].to_vec(), link)
}

pub(super) fn paged(base_url: &str, path: &str, query: Option<&str>, items: Vec<Value>) -> Reply {
    let (page, link) = page_of(base_url, path, query, &items);
    with_link(Reply::json(200, &Value::Array(page)), link)
}

fn with_link(reply: Reply, link: Option<String>) -> Reply {
    match link {
        Some(link) => reply.header("link", link),
        None => reply,
    }
}

/// A paged list inside an object (`{"total_count": n, <field>: [...], ...extra}`).
pub(super) fn paged_object(
    base_url: &str,
    path: &str,
    query: Option<&str>,
    items: Vec<Value>,
    field: &str,
    mut extra: Value,
) -> Reply {
    let total = items.len();
    let (page, link) = page_of(base_url, path, query, &items);
    extra["total_count"] = json!(total);
    extra[field] = Value::Array(page);
    with_link(Reply::json(200, &extra), link)
}

pub(super) fn percent_decode(text: &str) -> String {
    let hex_value = |b: u8| {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex_value(bytes[i + 1]), hex_value(bytes[i + 2])) {
                out.push((high << 4) | low);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
