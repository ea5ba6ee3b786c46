//! GitHub webhook deliveries: their headers, the payload cap, and the signature.
//!
//! GitHub signs each delivery with the webhook's secret: `X-Hub-Signature-256` is
//! `sha256=` and the lowercase hex HMAC-SHA256 of the exact body bytes
//! (<https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries>).
//! [`verify_signature`] checks it in constant time before anything reads the body.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header holding the body's HMAC-SHA256, `sha256=<hex>`
/// (<https://docs.github.com/en/webhooks/webhook-events-and-payloads#delivery-headers>).
pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";
/// The header holding the delivery's unique id (a GUID), the same on a redelivery.
pub const DELIVERY_HEADER: &str = "x-github-delivery";
/// The header naming the event, such as `pull_request` or `issue_comment`.
pub const EVENT_HEADER: &str = "x-github-event";
/// The largest body a delivery has: "Payloads are capped at 25 MB. If an event generates a
/// larger payload, GitHub will not deliver a payload for that webhook event."
/// (<https://docs.github.com/en/webhooks/webhook-events-and-payloads#payload-cap>). Read
/// as 25 MiB, the larger reading, so that no delivery GitHub sends is refused.
pub const MAX_BODY_BYTES: usize = 25 * 1024 * 1024;

/// What the signature header starts with.
const PREFIX: &str = "sha256=";
/// The bytes of an HMAC-SHA256.
const MAC_BYTES: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// The `X-Hub-Signature-256` value GitHub sends for `body` under `secret`:
/// `sha256=` and the lowercase hex HMAC-SHA256.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes a key of any length, so this never fails; an empty string never verifies.
    let Ok(mut mac) = HmacSha256::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut out = String::with_capacity(PREFIX.len() + 2 * MAC_BYTES);
    out.push_str(PREFIX);
    for byte in digest {
        out.push(hex_digit(byte >> 4));
        out.push(hex_digit(byte & 0x0f));
    }
    out
}

/// True when `header` is the signature of the exact `body` bytes under `secret`, compared
/// in constant time (`hmac`'s `verify_slice`). False when the header is absent, does not
/// start with `sha256=`, is not 64 lowercase hex digits after it (GitHub sends a lowercase
/// hex digest), or does not match; and always false
/// for an empty secret (a webhook without a secret proves nothing).
pub fn verify_signature(secret: &[u8], body: &[u8], header: Option<&str>) -> bool {
    if secret.is_empty() {
        return false;
    }
    let Some(expected) = header
        .and_then(|h| h.strip_prefix(PREFIX))
        .and_then(decode_hex)
    else {
        return false;
    };
    let Ok(mut mac) = HmacSha256::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

fn hex_digit(nibble: u8) -> char {
    char::from(b"0123456789abcdef"[usize::from(nibble & 0x0f)])
}

/// The 32 bytes of 64 lowercase hex digits, or `None`.
fn decode_hex(hex: &str) -> Option<[u8; MAC_BYTES]> {
    let digits = hex.as_bytes();
    if digits.len() != 2 * MAC_BYTES {
        return None;
    }
    let mut out = [0u8; MAC_BYTES];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

/// The value of one lowercase hex digit.
fn nibble(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// GitHub's test values, from "Testing the webhook payload validation" on
    /// <https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries>.
    const DOC_SECRET: &str = "It's a Secret to Everybody";
    const DOC_PAYLOAD: &str = "Hello, World!";
    const DOC_SIGNATURE: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    #[test]
    fn githubs_documented_example_signs_and_verifies() {
        assert_eq!(
            sign(DOC_SECRET.as_bytes(), DOC_PAYLOAD.as_bytes()),
            DOC_SIGNATURE
        );
        assert!(verify_signature(
            DOC_SECRET.as_bytes(),
            DOC_PAYLOAD.as_bytes(),
            Some(DOC_SIGNATURE)
        ));
    }

    #[test]
    fn uppercase_hex_is_not_githubs_form() {
        let upper = format!("sha256={}", DOC_SIGNATURE[7..].to_ascii_uppercase());
        assert!(!verify_signature(
            DOC_SECRET.as_bytes(),
            DOC_PAYLOAD.as_bytes(),
            Some(&upper)
        ));
    }

    #[test]
    fn absent_malformed_or_wrong_headers_never_verify() {
        let secret = DOC_SECRET.as_bytes();
        let body = DOC_PAYLOAD.as_bytes();
        let hex = &DOC_SIGNATURE[7..];
        let wrong_prefix = format!("sha1={hex}");
        let no_prefix = hex.to_string();
        let upper_prefix = format!("SHA256={hex}");
        let short = format!("sha256={}", &hex[..62]);
        let long = format!("sha256={hex}00");
        let odd = format!("sha256={}0", &hex[..63]);
        let not_hex = format!("sha256={}zz", &hex[..62]);
        let spaced = format!(" sha256={hex}");
        let trailing = format!("sha256={hex}\n");
        for header in [
            None,
            Some(""),
            Some("sha256="),
            Some(wrong_prefix.as_str()),
            Some(no_prefix.as_str()),
            Some(upper_prefix.as_str()),
            Some(short.as_str()),
            Some(long.as_str()),
            Some(odd.as_str()),
            Some(not_hex.as_str()),
            Some(spaced.as_str()),
            Some(trailing.as_str()),
        ] {
            assert!(!verify_signature(secret, body, header), "{header:?}");
        }
    }

    #[test]
    fn an_empty_secret_never_verifies_even_its_own_signature() {
        let signature = sign(b"", b"body");
        assert!(signature.starts_with("sha256="));
        assert!(!verify_signature(b"", b"body", Some(&signature)));
    }

    #[test]
    fn the_payload_cap_is_githubs_25_mb() {
        assert_eq!(MAX_BODY_BYTES, 26_214_400);
    }

    proptest! {
        #[test]
        fn what_is_signed_verifies(
            secret in prop::collection::vec(any::<u8>(), 1..80),
            body in prop::collection::vec(any::<u8>(), 0..512),
        ) {
            let signature = sign(&secret, &body);
            prop_assert_eq!(signature.len(), 71);
            prop_assert!(signature[7..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
            prop_assert!(verify_signature(&secret, &body, Some(&signature)));
        }

        #[test]
        fn any_flipped_byte_fails(
            secret in prop::collection::vec(any::<u8>(), 1..80),
            body in prop::collection::vec(any::<u8>(), 1..512),
            at in any::<prop::sample::Index>(),
            bit in 0u8..8,
            which in 0u8..3,
        ) {
            let signature = sign(&secret, &body);
            let (mut secret, mut body, mut signature) = (secret, body, signature.into_bytes());
            match which {
                0 => { let i = at.index(body.len()); body[i] ^= 1 << bit; }
                1 => { let i = at.index(secret.len()); secret[i] ^= 1 << bit; }
                _ => { let i = at.index(signature.len()); signature[i] ^= 1 << bit; }
            }
            let header = String::from_utf8_lossy(&signature).into_owned();
            prop_assert!(!verify_signature(&secret, &body, Some(&header)));
        }
    }
}
