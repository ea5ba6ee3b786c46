//! The SSRF guard of notification deliveries: where Sortie may send a request a tenant
//! pointed it at.
//!
//! A destination's URL is `https://` ([`destination_url`]); plain `http://` only to a
//! loopback host, and only in `sortie dev`. Its host is resolved once, every address it
//! resolves to must be public ([`address_refusal`]), and the request goes to an address
//! that was checked, so a name that resolves elsewhere the second time (DNS rebinding)
//! changes nothing. Redirects are not followed.
//!
//! Refused: loopback, private (RFC 1918), shared (RFC 6598), link-local (where the instance
//! metadata service is: `169.254.169.254`), unique local IPv6 (`fd00:ec2::254`, its IPv6
//! address), documentation, benchmarking, multicast, reserved and unspecified addresses,
//! and IPv6 forms that carry an IPv4 address (mapped, NAT64, 6to4) when that address is
//! refused; Teredo and local-use NAT64 always.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// Why `ip` may not be sent a delivery, or `None` when it is a public address.
pub fn address_refusal(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_refusal(v4),
        IpAddr::V6(v6) => v6_refusal(v6),
    }
}

/// [`address_refusal`], except that loopback is allowed (`sortie dev`'s local receivers).
pub fn address_refusal_local(ip: IpAddr) -> Option<&'static str> {
    let loopback = match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    };
    if loopback {
        None
    } else {
        address_refusal(ip)
    }
}

fn v4_refusal(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    let refused = match (a, b, c) {
        (0, _, _) => "an address of \"this network\" (0.0.0.0/8)",
        (10, _, _) => "a private address (10.0.0.0/8)",
        (100, 64..=127, _) => "a shared address (100.64.0.0/10, carrier-grade NAT)",
        (127, _, _) => "a loopback address (127.0.0.0/8)",
        (169, 254, _) => {
            "a link-local address (169.254.0.0/16, where the instance metadata service is)"
        }
        (172, 16..=31, _) => "a private address (172.16.0.0/12)",
        (192, 0, 0) => "an IETF protocol address (192.0.0.0/24)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "a documentation address",
        (192, 88, 99) => "a 6to4 relay address (192.88.99.0/24)",
        (192, 168, _) => "a private address (192.168.0.0/16)",
        (198, 18..=19, _) => "a benchmarking address (198.18.0.0/15)",
        (224..=239, _, _) => "a multicast address (224.0.0.0/4)",
        (240..=255, _, _) => "a reserved or broadcast address (240.0.0.0/4)",
        _ => return None,
    };
    Some(refused)
}

fn v6_refusal(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("the unspecified address (::)");
    }
    if ip.is_loopback() {
        return Some("the loopback address (::1)");
    }
    // ::ffff:a.b.c.d, an IPv4 address in IPv6 clothes.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_refusal(v4);
    }
    // ::a.b.c.d (deprecated IPv4-compatible).
    if s[..6] == [0; 6] {
        return Some("an IPv4-compatible address (::/96)");
    }
    // 64:ff9b::a.b.c.d, NAT64's well-known prefix: the IPv4 address behind it decides.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        return v4_refusal(v4);
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        return Some("a local-use NAT64 address (64:ff9b:1::/48)");
    }
    // 2002:aabb:ccdd::, 6to4: the IPv4 address in its second and third groups decides.
    if s[0] == 0x2002 {
        let v4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        return v4_refusal(v4).map(|_| "a 6to4 address of a refused IPv4 address (2002::/16)");
    }
    let refused = match s[0] {
        0x2001 if s[1] == 0 => "a Teredo address (2001::/32)",
        0x2001 if s[1] == 0x0db8 => "a documentation address (2001:db8::/32)",
        0x0100 if s[1..4] == [0, 0, 0] => "a discard-only address (100::/64)",
        x if x & 0xfe00 == 0xfc00 => {
            "a unique local address (fc00::/7, where the instance metadata service's IPv6 address is)"
        }
        x if x & 0xffc0 == 0xfe80 => "a link-local address (fe80::/10)",
        x if x & 0xffc0 == 0xfec0 => "a site-local address (fec0::/10)",
        x if x & 0xff00 == 0xff00 => "a multicast address (ff00::/8)",
        _ => return None,
    };
    Some(refused)
}

/// Parses a destination's URL: `https://` with a host, no user name or password; plain
/// `http://` only to a loopback host when `local` (`sortie dev`). A host that is an IP
/// address is checked here; a name is checked once it is resolved. The problem, in words,
/// if not.
pub fn destination_url(value: &str, local: bool) -> Result<Url, String> {
    let url = crate::urls::web_url(value)?;
    let host = url.host().ok_or("must have a host")?;
    let loopback = crate::urls::is_loopback_host(&host);
    if url.scheme() != "https" && !(local && loopback) {
        return Err(
            "must be an https:// URL (plain http:// only to a loopback host in `sortie dev`)"
                .into(),
        );
    }
    let ip = match host {
        Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        Host::Domain(d) if d == "localhost" && !local => {
            return Err("must not be localhost: deliveries go to public addresses only".into())
        }
        Host::Domain(_) => None,
    };
    let check = if local {
        address_refusal_local
    } else {
        address_refusal
    };
    if let Some(problem) = ip.and_then(check) {
        return Err(format!(
            "must not be {problem}: deliveries go to public addresses only"
        ));
    }
    Ok(url)
}

/// The addresses of a resolved host that may be sent a delivery, in the resolver's order:
/// all of them, or a refusal naming the first that may not (one refused address refuses
/// the host, so a name cannot mix a public address with an internal one).
pub fn checked_addresses(
    host: &str,
    resolved: &[IpAddr],
    local: bool,
) -> Result<Vec<IpAddr>, String> {
    if resolved.is_empty() {
        return Err(format!("`{host}` resolves to no address"));
    }
    let check = if local {
        address_refusal_local
    } else {
        address_refusal
    };
    for ip in resolved {
        if let Some(problem) = check(*ip) {
            return Err(format!(
                "`{host}` resolves to {ip}, {problem}: deliveries go to public addresses only"
            ));
        }
    }
    Ok(resolved.to_vec())
}
