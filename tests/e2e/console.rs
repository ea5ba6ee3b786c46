//! The console through `sortie dev`'s development token check: the page and its assets need no token
//! (GET and HEAD only), the API still does; the console's URL is printed and in the
//! ready file.

use std::io::{Read, Write};
use std::time::Duration;

use crate::common::{start_dev, DevOptions};

/// One HTTP/1.1 request: the status, the headers (names lowercased) and the body.
fn raw(
    base: &str,
    method: &str,
    path: &str,
    auth: Option<&str>,
) -> (u16, Vec<(String, String)>, String) {
    let host = base.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok();
    let auth = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{auth}\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body.to_string())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn the_console_needs_no_token_but_the_api_behind_it_still_does() {
    sortie_testkit::require_aws!();
    let dev = start_dev(DevOptions {
        prefix: "console",
        ..Default::default()
    });
    let ready: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dev.dir.join("ready.json")).unwrap())
            .unwrap();
    assert_eq!(ready["console"], format!("{}/", dev.url));
    let log = std::fs::read_to_string(dev.dir.join("dev.log")).unwrap();
    assert!(
        log.contains(&format!("sortie dev: console {}/", dev.url)),
        "{log}"
    );

    // The page, without a token: local sign-in, the policy, the hashed assets.
    let (status, headers, page) = raw(&dev.url, "GET", "/", None);
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        header(&headers, "content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(header(&headers, "content-security-policy")
        .is_some_and(|c| c.contains("frame-ancestors 'none'")));
    assert!(
        page.contains("{&quot;mode&quot;:&quot;local&quot;}"),
        "{page}"
    );
    let hash = sortie_api::console::ASSET_HASH;
    assert!(page.contains(&format!("/assets/{hash}/")), "{page}");
    let (status, _, body) = raw(&dev.url, "HEAD", "/", None);
    assert_eq!((status, body.as_str()), (200, ""));
    let asset = sortie_api::console::ASSETS
        .iter()
        .find(|a| a.path != sortie_api::console::INDEX)
        .unwrap();
    let (status, headers, _) = raw(
        &dev.url,
        "GET",
        &format!("/assets/{hash}/{}", asset.path),
        None,
    );
    assert_eq!(status, 200);
    assert_eq!(
        header(&headers, "cache-control"),
        Some(sortie_api::console::IMMUTABLE)
    );

    // Only reads pass: a write to `/` is refused by the gate like any other.
    let (status, _, _) = raw(&dev.url, "POST", "/", None);
    assert_eq!(status, 401);
    // The API behind it still needs the token, and takes it.
    let (status, _, body) = raw(&dev.url, "GET", "/v1/whoami", None);
    assert_eq!(status, 401, "{body}");
    let bearer = format!("Bearer {}", dev.token);
    let (status, _, body) = raw(&dev.url, "GET", "/v1/whoami", Some(&bearer));
    assert_eq!(status, 200, "{body}");
}
