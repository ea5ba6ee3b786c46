//! Offset pagination as GitLab does it: `page` and `per_page` (20 by default, at most 100),
//! the `x-*` headers and the `Link` header (rules::DEFAULT_PER_PAGE).

use serde_json::Value;

use super::{Params, Reply};
use crate::gitlab::rules;

/// One page of `items`, with GitLab's pagination headers.
pub(crate) fn paged(
    base_url: &str,
    path: &str,
    params: &Params,
    items: Vec<Value>,
) -> Result<Reply, Reply> {
    let number = |name: &str| -> Result<Option<usize>, Reply> {
        match params.text(name) {
            None => Ok(None),
            Some(text) => text
                .parse::<usize>()
                .map(Some)
                .map_err(|_| Reply::error(400, &format!("{name} is invalid"))),
        }
    };
    let per_page = number("per_page")?
        .filter(|n| *n > 0)
        .unwrap_or(rules::DEFAULT_PER_PAGE)
        .min(rules::MAX_PER_PAGE);
    let page = number("page")?.unwrap_or(1).max(1);
    let total = items.len();
    let total_pages = total.div_ceil(per_page).max(1);
    let start = (page - 1).saturating_mul(per_page).min(total);
    let end = (start + per_page).min(total);
    let others: Vec<String> = params
        .values
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "page" | "per_page" | "private_token" | "access_token"
            )
        })
        .filter_map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            Some(format!("{}={}", percent_encode(k), percent_encode(&text)))
        })
        .collect();
    let link = |n: usize, rel: &str| {
        let mut pairs = others.clone();
        pairs.push(format!("page={n}"));
        pairs.push(format!("per_page={per_page}"));
        format!("<{base_url}{path}?{}>; rel=\"{rel}\"", pairs.join("&"))
    };
    let mut links = Vec::new();
    if page > 1 {
        links.push(link((page - 1).min(total_pages), "prev"));
    }
    if page < total_pages {
        links.push(link(page + 1, "next"));
    }
    links.push(link(1, "first"));
    links.push(link(total_pages, "last"));
    let next = if page < total_pages {
        (page + 1).to_string()
    } else {
        String::new()
    };
    let prev = if page > 1 {
        (page - 1).to_string()
    } else {
        String::new()
    };
    Ok(Reply::json(200, &Value::Array(items[start..end].to_vec()))
        .header("x-page", page.to_string())
        .header("x-per-page", per_page.to_string())
        .header("x-next-page", next)
        .header("x-prev-page", prev)
        .header("x-total", total.to_string())
        .header("x-total-pages", total_pages.to_string())
        .header("link", links.join(", ")))
}

/// Percent-decodes `text` (invalid escapes are kept as written).
pub(crate) fn percent_decode(text: &str) -> String {
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

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
