//! The URLs Sortie accepts, judged by their parsed scheme and host, never by a string
//! prefix (issue 25, item 13).
//!
//! A prefix check takes `http://127.0.0.1.evil.com`, `http://localhost@evil.com` or
//! `http://localhost.evil.com` for loopback. Here every URL is parsed (WHATWG URL, the
//! `url` crate) and its real host decides: plain `http://` only for a host that is a
//! loopback IP (`127.0.0.0/8`, `::1`) or exactly `localhost`; `https://` for anything
//! else; never a user name or password in a URL that Sortie fetches.

use url::{Host, Url};

/// The longest URL accepted in any field (an OIDC issuer, a backend endpoint, a git URL).
pub const URL_MAX: usize = 2048;

/// True when `host` is loopback: an IPv4 address in `127.0.0.0/8`, the IPv6 `::1`, or the
/// domain `localhost` exactly (no subdomain, no trailing dot).
pub fn is_loopback_host(host: &Host<&str>) -> bool {
    match host {
        Host::Domain(d) => *d == "localhost",
        Host::Ipv4(ip) => ip.is_loopback(),
        Host::Ipv6(ip) => ip.is_loopback(),
    }
}

/// Parses a URL that Sortie fetches or hands to a client that fetches: `https://` with a
/// host, or plain `http://` only to a loopback host (tests and local development). No
/// user name or password, no spaces or control characters. The problem, in words, if not.
pub fn web_url(value: &str) -> Result<Url, String> {
    if crate::limits::has_space_or_control(value) {
        return Err("must not contain spaces or control characters".into());
    }
    if value.len() > URL_MAX {
        return Err(format!("must be at most {URL_MAX} characters"));
    }
    let url = Url::parse(value).map_err(|e| format!("is not a URL: {e}"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry a user name or password (`user@host`)".into());
    }
    let Some(host) = url.host() else {
        return Err("must be an https:// URL with a host".into());
    };
    match url.scheme() {
        "https" => Ok(url),
        "http" if is_loopback_host(&host) => Ok(url),
        "http" => Err(format!(
            "plain http:// is only for a loopback host (127.0.0.1, ::1 or localhost), \
             and `{host}` is not one: use https://"
        )),
        other => Err(format!("must be an https:// URL, not {other}://")),
    }
}

/// What is wrong with an OIDC issuer URL, if anything: a [`web_url`] of at most 512
/// characters, without a query or a fragment (OpenID Connect Discovery 1.0, §2).
pub fn issuer_problem(value: &str) -> Option<String> {
    if value.len() > 512 {
        return Some("must be at most 512 characters".into());
    }
    match web_url(value) {
        Err(problem) => Some(problem),
        Ok(url) if url.query().is_some() || url.fragment().is_some() => {
            Some("must have no query (`?`) or fragment (`#`)".into())
        }
        Ok(_) => None,
    }
}

/// What is wrong with a git source URL, if anything: `https://` or `ssh://` with a real
/// host, `file://`, or the scp-like `git@host:path`. Never credentials in the URL (a
/// credentials secret carries them): no user name or password on `https://` or
/// `file://` (`https://ghp_…@github.com/…` is a token), no password on `ssh://` (whose
/// user name, `ssh://git@host/…`, is the account); never spaces or control characters.
pub fn git_url_problem(value: &str) -> Option<String> {
    if crate::limits::has_space_or_control(value) {
        return Some("must not contain spaces or control characters".into());
    }
    if value.len() > URL_MAX {
        return Some(format!("must be at most {URL_MAX} characters"));
    }
    if let Some(rest) = value.strip_prefix("git@") {
        // scp-like syntax: `git@host:path`; the host must be a real host name.
        let host = rest.split_once(':').map(|(h, _)| h).unwrap_or("");
        return match Host::parse(host) {
            Ok(_) if !host.is_empty() && !host.starts_with('-') => None,
            _ => Some(format!(
                "`{}` is not `git@<host>:<path>`",
                value.escape_debug()
            )),
        };
    }
    let url = match Url::parse(value) {
        Ok(url) => url,
        Err(e) => return Some(format!("is not a URL: {e}")),
    };
    // A user name before `@` is a credential on https:// (`https://<token>@host`, which git
    // sends as the user name) and means nothing on file://; on ssh:// it is the account
    // (`ssh://git@host/…`), as in the scp-like form above. A password never.
    if url.password().is_some() || (!url.username().is_empty() && url.scheme() != "ssh") {
        return Some(
            "must not carry credentials (`user@` or `user:password@`): put them in \
             `credentials_secret`"
                .into(),
        );
    }
    match url.scheme() {
        "https" | "ssh" if url.host_str().is_some_and(|h| !h.is_empty()) => None,
        "file" => None,
        _ => Some(format!(
            "`{}` is not an https://, ssh://, git@ or file:// URL",
            value.escape_debug()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_only_to_a_real_loopback_host() {
        for ok in [
            "https://example.com/id",
            "http://127.0.0.1:8080/id/TEST",
            "http://127.9.9.9",
            "http://localhost:9000",
            "http://[::1]:80/x",
        ] {
            assert!(web_url(ok).is_ok(), "{ok}: {:?}", web_url(ok));
        }
        for bad in [
            "http://127.0.0.1.evil.com",
            "http://localhost@evil.com",
            "http://localhost.evil.com",
            "http://localhost:pass@evil.com",
            "http://evil.com#@127.0.0.1",
            "http://evil.com?127.0.0.1",
            "http://evil.com/127.0.0.1",
            "http://localhost./",
            "http://[::ffff:127.0.0.1]/",
            "https://user@example.com",
            "ftp://127.0.0.1",
            "http://127.0.0.1\n.evil.com",
            "https://",
            "127.0.0.1",
        ] {
            assert!(web_url(bad).is_err(), "{bad} was accepted");
        }
        assert!(issuer_problem("https://idp.example.com?x=1").is_some());
        assert!(issuer_problem("https://idp.example.com/").is_none());
    }

    #[test]
    fn git_urls_have_a_real_host_and_no_password() {
        for ok in [
            "https://github.com/acme/infra.git",
            "ssh://git@github.com/acme/infra.git",
            "ssh://github.com/acme/infra.git",
            "git@github.com:acme/infra.git",
            "file:///srv/git/infra",
        ] {
            assert_eq!(git_url_problem(ok), None, "{ok}");
        }
        for bad in [
            "https://u:p@github.com/o/r.git",
            "https://ghp_0123456789abcdef@github.com/o/r.git",
            "https://x-access-token@github.com/o/r.git",
            "https://:p@github.com/o/r.git",
            "ssh://git:p@github.com/o/r.git",
            "file://u@localhost/srv/git/infra",
            "http://github.com/o/r.git",
            "git@:o/r.git",
            "git@-oProxyCommand=x:o/r",
            "https://github.com/o/r.git\n",
            "ssh:///o/r",
        ] {
            assert!(git_url_problem(bad).is_some(), "{bad} was accepted");
        }
    }
}
