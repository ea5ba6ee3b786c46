//! The console's serving: placeholders, escaping, headers, the asset table, and the
//! assets' budget and safety rules.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use std::io::Write as _;
use tower::ServiceExt;

use super::*;

async fn send(
    config: ConsoleConfig,
    method: &str,
    path: &str,
) -> (StatusCode, http::HeaderMap, String) {
    let response = router(config)
        .oneshot(
            Request::builder()
                .method(method)
                .uri(path)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

fn header<'a>(headers: &'a http::HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

/// Any asset other than index.html, to fetch.
fn some_asset() -> &'static Asset {
    ASSETS
        .iter()
        .find(|a| a.path != INDEX)
        .expect("the build embeds at least one asset besides index.html")
}

fn assert_security_headers(headers: &http::HeaderMap) {
    let csp = header(headers, "content-security-policy");
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} missing from {csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(header(headers, "x-content-type-options"), "nosniff");
    assert_eq!(header(headers, "referrer-policy"), "no-referrer");
    assert_eq!(header(headers, "x-frame-options"), "DENY");
}

#[tokio::test]
async fn index_has_its_placeholders_replaced_and_is_revalidated() {
    let (status, headers, body) = send(ConsoleConfig::local(), "GET", "/").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, "content-type"), "text/html; charset=utf-8");
    assert_eq!(header(&headers, "cache-control"), "no-cache");
    assert!(
        !body.contains("{{ASSETS}}") && !body.contains("{{CONFIG}}"),
        "{body}"
    );
    assert!(body.contains(&format!("/assets/{ASSET_HASH}/")), "{body}");
    assert!(
        body.contains("content=\"{&quot;mode&quot;:&quot;local&quot;}\""),
        "{body}"
    );
    assert_security_headers(&headers);
}

#[tokio::test]
async fn a_hostile_configuration_value_is_escaped() {
    let hostile = "\"><script>alert(1)</script>'&";
    let mut config = ConsoleConfig::oidc("https://issuer.example", hostile, "aud");
    let (_, _, body) = send(config.clone(), "GET", "/").await;
    assert!(!body.contains("<script>alert(1)"), "{body}");
    assert!(
        body.contains("\\&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&#39;&amp;"),
        "{body}"
    );
    // The attribute holds exactly the configuration: unescaped, it is the JSON back.
    let start = body
        .find("name=\"sortie-console\" content=\"")
        .expect("the meta tag")
        + "name=\"sortie-console\" content=\"".len();
    let attr = &body[start..start + body[start..].find('"').unwrap()];
    let unescaped = attr
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    assert_eq!(unescaped, config.to_json());
    // Nor does a hostile issuer reach the policy header.
    if let ConsoleMode::Oidc(oidc) = &mut config.mode {
        oidc.issuer = "https://a.example; script-src *".into();
        oidc.token_endpoint = Some("javascript:alert(1)".into());
    }
    let csp = content_security_policy(&config);
    assert!(csp.contains("connect-src 'self'; "), "{csp}");
    assert!(!csp.contains("script-src *"), "{csp}");
}

#[tokio::test]
async fn connect_src_allows_the_issuer_and_the_token_endpoint_origins() {
    let mut config = ConsoleConfig::oidc(
        "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_abc",
        "client",
        "aud",
    );
    if let ConsoleMode::Oidc(oidc) = &mut config.mode {
        oidc.token_endpoint =
            Some("https://sortie.auth.eu-west-1.amazoncognito.com/oauth2/token".into());
    }
    let (_, headers, _) = send(config, "GET", "/").await;
    assert!(header(&headers, "content-security-policy").contains(
        "connect-src 'self' https://cognito-idp.eu-west-1.amazonaws.com \
         https://sortie.auth.eu-west-1.amazoncognito.com;"
    ));
    let (_, headers, _) = send(ConsoleConfig::local(), "GET", "/").await;
    assert!(header(&headers, "content-security-policy").contains("connect-src 'self';"));
}

#[tokio::test]
async fn an_asset_is_served_immutable_with_its_type_and_the_security_headers() {
    let a = some_asset();
    let (status, headers, body) = send(
        ConsoleConfig::local(),
        "GET",
        &format!("/assets/{ASSET_HASH}/{}", a.path),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, "cache-control"), IMMUTABLE);
    assert_eq!(header(&headers, "content-type"), a.content_type);
    assert_eq!(body.as_bytes(), a.bytes);
    assert_security_headers(&headers);
}

#[test]
fn scripts_styles_and_texts_have_their_content_types() {
    for a in ASSETS {
        let want = match a.path.rsplit_once('.').map(|(_, e)| e) {
            Some("js") => "text/javascript; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("svg") => "image/svg+xml",
            Some("txt") => "text/plain; charset=utf-8",
            Some("html") => "text/html; charset=utf-8",
            _ => continue,
        };
        assert_eq!(a.content_type, want, "{}", a.path);
    }
}

#[tokio::test]
async fn an_unknown_hash_or_path_is_a_json_404_and_nothing_outside_the_table_is_read() {
    let a = some_asset();
    for path in [
        format!("/assets/0000000000000000/{}", a.path),
        format!("/assets/{ASSET_HASH}/no-such-file.js"),
        format!("/assets/{ASSET_HASH}/../Cargo.toml"),
        format!("/assets/{ASSET_HASH}/%2e%2e/%2e%2e/Cargo.toml"),
        format!("/assets/{ASSET_HASH}/..%2fsrc%2flib.rs"),
        format!("/assets/{ASSET_HASH}/{INDEX}"),
    ] {
        let (status, headers, body) = send(ConsoleConfig::local(), "GET", &path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(header(&headers, "content-type"), "application/json");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(json["error"]["code"], "not_found", "{body}");
        assert!(json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("was not found"));
        assert!(json["error"]["fields"].as_array().unwrap().is_empty());
        assert_security_headers(&headers);
    }
}

#[tokio::test]
async fn head_answers_the_headers_without_a_body() {
    let (status, headers, body) = send(ConsoleConfig::local(), "HEAD", "/").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, "content-type"), "text/html; charset=utf-8");
    assert!(body.is_empty());
    assert_security_headers(&headers);
    let a = some_asset();
    let (status, headers, body) = send(
        ConsoleConfig::local(),
        "HEAD",
        &format!("/assets/{ASSET_HASH}/{}", a.path),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, "cache-control"), IMMUTABLE);
    assert!(body.is_empty());
}

#[tokio::test]
async fn another_method_is_a_json_405_naming_get_and_head() {
    let (status, headers, body) = send(ConsoleConfig::local(), "POST", "/").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(header(&headers, "allow"), "GET, HEAD");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["error"]["code"], "method_not_allowed");
    assert_security_headers(&headers);
}

#[test]
fn the_configuration_json_is_the_contracts() {
    assert_eq!(ConsoleConfig::local().to_json(), r#"{"mode":"local"}"#);
    let json: serde_json::Value =
        serde_json::from_str(&ConsoleConfig::oidc("https://i.example", "", "aud").to_json())
            .unwrap();
    assert_eq!(
        json,
        serde_json::json!({"mode": "oidc", "issuer": "https://i.example", "client_id": "",
            "scopes": DEFAULT_SCOPES, "audience": "aud"})
    );
}

#[test]
fn the_hash_is_sixteen_hex_digits_and_the_table_is_sorted() {
    assert_eq!(ASSET_HASH.len(), 16);
    assert!(ASSET_HASH.chars().all(|c| c.is_ascii_hexdigit()));
    assert!(ASSETS.windows(2).all(|w| w[0].path < w[1].path));
    assert!(asset(INDEX).is_some(), "index.html is embedded");
}

/// The issue's budget: the console's own assets are at most 150 KB gzipped in all.
#[test]
fn the_assets_are_at_most_150_kb_gzipped() {
    let mut total = 0usize;
    for a in ASSETS {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(a.bytes).unwrap();
        let size = gz.finish().unwrap().len();
        println!("{:>8} {:>8} {}", a.bytes.len(), size, a.path);
        total += size;
    }
    let raw: usize = ASSETS.iter().map(|a| a.bytes.len()).sum();
    println!(
        "console assets: {} files, {raw} bytes, {total} bytes gzipped",
        ASSETS.len()
    );
    assert!(
        total <= 150 * 1024,
        "the assets are {total} bytes gzipped, over 150 KB"
    );
}

/// Whether `needle` occurs in `text` not as the tail of a longer identifier
/// (`retrieval(` is not `eval(`).
fn occurs(text: &str, needle: &str) -> bool {
    text.match_indices(needle).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    })
}

/// `deny/vendored.toml`, whose `[sha256]` table pins vendored files byte for byte.
const VENDORED_TOML: &str = include_str!("../../../deny/vendored.toml");

/// Where the assets are, from the repository root (the pins' paths start so).
const ASSETS_DIR: &str = "crates/console/assets/";

/// The `[sha256]` table of `deny/vendored.toml`: path from the repository root → hex.
/// Read by hand (`"path" = "hex"` lines up to the next table), as it is that simple.
fn pinned_sha256(toml: &str) -> std::collections::BTreeMap<String, String> {
    toml.lines()
        .map(str::trim)
        .skip_while(|l| *l != "[sha256]")
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let (path, hash) = l.split_once('=')?;
            let unquote = |s: &str| {
                s.trim()
                    .strip_prefix('"')?
                    .strip_suffix('"')
                    .map(String::from)
            };
            Some((unquote(path)?, unquote(hash)?))
        })
        .collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// True for a vendored asset (under `vendor/`) whose bytes are exactly the pinned ones.
fn vendored_as_pinned(
    pins: &std::collections::BTreeMap<String, String>,
    path: &str,
    bytes: &[u8],
) -> bool {
    path.starts_with("vendor/")
        && pins
            .get(&format!("{ASSETS_DIR}{path}"))
            .is_some_and(|pin| *pin == sha256_hex(bytes))
}

/// The words that build HTML from strings or evaluate code, found in `text`.
fn forbidden_words(text: &str) -> Vec<&'static str> {
    [
        "innerHTML",
        "outerHTML",
        "dangerouslySetInnerHTML",
        "insertAdjacentHTML",
        "eval(",
        "new Function",
        "document.write",
    ]
    .into_iter()
    .filter(|f| occurs(text, f))
    .collect()
}

#[test]
fn every_vendored_script_is_pinned_and_unchanged() {
    let pins = pinned_sha256(VENDORED_TOML);
    let scripts: Vec<&Asset> = ASSETS
        .iter()
        .filter(|a| a.path.starts_with("vendor/") && a.path.ends_with(".js"))
        .collect();
    assert!(
        scripts
            .iter()
            .any(|a| a.path == "vendor/preact-htm-standalone.js"),
        "the Preact + htm bundle is an asset"
    );
    for a in scripts {
        let path = format!("{ASSETS_DIR}{}", a.path);
        let pin = pins
            .get(&path)
            .unwrap_or_else(|| panic!("{path}: no sha256 in deny/vendored.toml's [sha256]"));
        assert_eq!(
            &sha256_hex(a.bytes),
            pin,
            "{path} differs from its pinned sha256: a vendored file is copied verbatim \
             (docs/decisions/console.md says how to update it, pin included)"
        );
    }
}

#[test]
fn only_a_pinned_unchanged_vendored_file_is_exempt_from_the_word_scan() {
    let pins = pinned_sha256(VENDORED_TOML);
    let preact = asset("vendor/preact-htm-standalone.js").expect("the bundle");
    assert!(vendored_as_pinned(&pins, preact.path, preact.bytes));
    // The bundle with one byte more, or the same bytes under another name, is scanned.
    let mut changed = preact.bytes.to_vec();
    changed.extend_from_slice(b"\n;document.write('x')");
    assert!(!vendored_as_pinned(&pins, preact.path, &changed));
    assert!(!vendored_as_pinned(&pins, "vendor/other.js", preact.bytes));
    assert!(!vendored_as_pinned(&pins, "app.js", preact.bytes));
    assert_eq!(forbidden_words("x;document.write('x')"), ["document.write"]);
    // A `[sha256]` table read by hand: comments and other tables are skipped.
    let toml = "[[vendored]]\npaths = [\"a\"]\n\n[sha256]\n# c\n\"p/q.js\" = \"ab\"\n[x]\n\"r\" = \"cd\"\n";
    assert_eq!(
        pinned_sha256(toml),
        std::collections::BTreeMap::from([("p/q.js".to_string(), "ab".to_string())])
    );
}

#[test]
fn no_asset_builds_html_from_strings_or_evaluates_code() {
    let pins = pinned_sha256(VENDORED_TOML);
    let mut found = vec![];
    for a in ASSETS
        .iter()
        .filter(|a| !vendored_as_pinned(&pins, a.path, a.bytes))
    {
        let text = String::from_utf8_lossy(a.bytes);
        for f in forbidden_words(&text) {
            found.push(format!("{}: {f}", a.path));
        }
    }
    assert!(
        found.is_empty(),
        "forbidden in the console's own code (or a vendored file that is not as pinned): {found:?}"
    );
}

#[test]
fn index_html_has_no_inline_script_style_or_handler() {
    let page = std::str::from_utf8(asset(INDEX).unwrap().bytes)
        .unwrap()
        .to_ascii_lowercase();
    assert!(!page.contains("<style"), "an inline <style>");
    assert!(!page.contains(" style="), "a style= attribute");
    assert!(!page.contains("javascript:"), "a javascript: URL");
    for (i, _) in page.match_indices("<script") {
        let tag = &page[i..i + page[i..].find('>').expect("a closed tag")];
        assert!(tag.contains(" src="), "an inline script: {tag}");
        let after = &page[i + tag.len() + 1..];
        assert!(
            after.trim_start().starts_with("</script>"),
            "a script with content"
        );
    }
    for attr in page.split_whitespace() {
        let is_handler = attr.starts_with("on")
            && attr
                .split_once('=')
                .is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_alphabetic()));
        assert!(!is_handler, "an inline event handler: {attr}");
    }
}

/// The one script that may spell API paths: generated from the OpenAPI document by
/// `sortie_client::console_module()` and checked against it by crates/client's tests.
const ENDPOINTS_JS: &str = "endpoints.js";

/// The lines outside endpoints.js that may hold an API path while not calling it (a
/// comment line always may): `(script, text on the line)`. Each must still be found.
const API_PATH_EXCEPTIONS: &[(&str, &str)] = &[
    // The audit filter's hint of what a target looks like.
    ("pages/audit.js", r#"placeholder="/v1/groups/""#),
];

/// Every `.js` file under `assets/`, read from the disk (recursively, whether embedded or
/// not): `(path under assets/ with '/', text)`, sorted by path.
fn scripts_on_disk() -> Vec<(String, String)> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "js" || e == "mjs") {
                let rel = path.strip_prefix(root).unwrap().components();
                let rel: Vec<_> = rel.map(|c| c.as_os_str().to_string_lossy()).collect();
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((rel.join("/"), text));
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    let mut out = vec![];
    walk(&root, &root, &mut out);
    out.sort();
    out
}

/// Whether `line` holds an API path: `/v1` ending there or followed by `/`, a quote, a
/// backtick or `?` (so `/v1/jobs`, `'/v1'` and `` `/v1${x}` ``, not `/v10`).
fn holds_api_path(line: &str) -> bool {
    line.match_indices("/v1").any(|(i, _)| {
        matches!(
            line[i + 3..].chars().next(),
            None | Some('/' | '\'' | '"' | '`' | '?' | '$')
        )
    })
}

/// The lines of `text` (the script at `path`) that spell an API path although it is not
/// endpoints.js, as `path:line: text`: neither a comment line nor one of `exceptions`.
/// Answers also the exceptions that allowed a line.
fn api_paths_outside_endpoints<'a>(
    path: &str,
    text: &str,
    exceptions: &'a [(&'a str, &'a str)],
) -> (Vec<String>, Vec<&'a (&'a str, &'a str)>) {
    let (mut found, mut used) = (vec![], vec![]);
    if path == ENDPOINTS_JS {
        return (found, used);
    }
    for (n, line) in text.lines().enumerate() {
        let code = line.trim_start();
        let comment = code.starts_with("//") || code.starts_with("/*") || code.starts_with('*');
        if comment || !holds_api_path(line) {
            continue;
        }
        match exceptions
            .iter()
            .find(|(p, allowed)| *p == path && line.contains(allowed))
        {
            Some(e) => used.push(e),
            None => found.push(format!("{path}:{}: {}", n + 1, line.trim())),
        }
    }
    (found, used)
}

/// Issue 43: the console calls the API only through endpoints.js, whose paths come from the
/// OpenAPI document; no other script spells a `/v1/` path, but for a comment line or one of
/// [`API_PATH_EXCEPTIONS`] (each of which must still be needed).
#[test]
fn the_console_calls_api_paths_only_through_endpoints_js() {
    let scripts = scripts_on_disk();
    for expected in [ENDPOINTS_JS, "api.js", "pages/job.js", "components/plan.js"] {
        assert!(
            scripts.iter().any(|(p, _)| p == expected),
            "{expected} is not among the scripts read"
        );
    }
    let (mut found, mut used) = (vec![], vec![]);
    for (path, text) in &scripts {
        let (f, u) = api_paths_outside_endpoints(path, text, API_PATH_EXCEPTIONS);
        found.extend(f);
        used.extend(u);
    }
    assert!(
        found.is_empty(),
        "API paths spelled outside assets/{ENDPOINTS_JS} (call endpoints.<operationId>(…) \
         instead, with any query from api.js's query() appended):\n{}",
        found.join("\n")
    );
    for e in API_PATH_EXCEPTIONS {
        assert!(used.contains(&e), "an exception no line needs: {e:?}");
    }
}

#[test]
fn a_planted_api_path_is_found_with_its_file_and_line() {
    let text = "// GET /v1/whoami, a comment\n\
                const me = await api('GET', '/v1/whoami');\n \
                * `/v1/jobs/{id}` in a doc comment\n\
                api('GET', `/v1/jobs/${id}${rest}`);\n\
                api('GET', '/v1' + rest);\n\
                const v = '/v10/x'; // not an API path\n\
                <input placeholder=\"/v1/groups/\" />\n";
    let exceptions = [("pages/audit.js", r#"placeholder="/v1/groups/""#)];
    let (found, used) = api_paths_outside_endpoints("pages/x.js", text, &exceptions);
    assert_eq!(
        found,
        [
            "pages/x.js:2: const me = await api('GET', '/v1/whoami');",
            "pages/x.js:4: api('GET', `/v1/jobs/${id}${rest}`);",
            "pages/x.js:5: api('GET', '/v1' + rest);",
            "pages/x.js:7: <input placeholder=\"/v1/groups/\" />",
        ]
    );
    assert!(used.is_empty());
    // The same placeholder in the script the exception names is allowed, and counted.
    let (found, used) = api_paths_outside_endpoints("pages/audit.js", text, &exceptions);
    assert_eq!(found.len(), 3, "{found:?}");
    assert_eq!(used, [&exceptions[0]]);
    // endpoints.js is where the paths are.
    assert_eq!(
        api_paths_outside_endpoints(ENDPOINTS_JS, text, &exceptions),
        (vec![], vec![])
    );
}

/// The names endpoints.js exports (`export const <name> =`, `export function <name>(`).
fn endpoints_exports(text: &str) -> std::collections::BTreeSet<&str> {
    text.lines()
        .filter_map(|l| {
            let rest = l
                .strip_prefix("export const ")
                .or_else(|| l.strip_prefix("export function "))?;
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
            Some(&rest[..end])
        })
        .collect()
}

/// The names called as `endpoints.<name>(` in `text`.
fn endpoints_called(text: &str) -> Vec<&str> {
    text.match_indices("endpoints.")
        .filter(|(i, _)| {
            let before = text[..*i].chars().next_back();
            !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '.')
        })
        .filter_map(|(i, needle)| {
            let rest = &text[i + needle.len()..];
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
            rest[end..].starts_with('(').then(|| &rest[..end])
        })
        .collect()
}

/// A misspelt operation would be a runtime error in the browser: every `endpoints.<name>(`
/// a script calls is one endpoints.js exports, and endpoints.js is served like any asset.
#[test]
fn every_endpoint_the_console_calls_is_generated_and_served() {
    let served = asset(ENDPOINTS_JS).expect("endpoints.js is an embedded asset");
    assert_eq!(served.content_type, "text/javascript; charset=utf-8");
    let exports = endpoints_exports(std::str::from_utf8(served.bytes).unwrap());
    for name in [
        "segment",
        "group",
        "get_job",
        "list_jobs",
        "whoami",
        "list_audit",
    ] {
        assert!(exports.contains(name), "endpoints.js exports no {name}");
    }
    let scripts = scripts_on_disk();
    let mut unknown = vec![];
    let mut calls = 0;
    for (path, text) in scripts.iter().filter(|(p, _)| p != ENDPOINTS_JS) {
        for name in endpoints_called(text) {
            calls += 1;
            if !exports.contains(name) {
                unknown.push(format!("{path}: endpoints.{name}"));
            }
        }
    }
    assert!(calls >= 30, "only {calls} endpoints.<name>( calls found");
    assert!(
        unknown.is_empty(),
        "called but not in endpoints.js: {unknown:?}"
    );
    assert_eq!(
        endpoints_called("endpoints.get_job(id) + x.endpoints.no(1) + '../endpoints.js'"),
        ["get_job"]
    );
}
