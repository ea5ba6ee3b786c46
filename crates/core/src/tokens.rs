//! Ids and secrets: new job and membership ids, random token secrets, and how a presented
//! token is checked against its stored hash.
//!
//! The one corner of core that reads the OS: [`new_id`] reads the clock and [`random_hex`]
//! the random source. Everything else here is a pure function.

/// A new, time-ordered, lower-case id (a ULID) for jobs and memberships.
pub fn new_id() -> String {
    ulid::Ulid::new().to_string().to_lowercase()
}

/// `bytes` random bytes from the OS, lower-case hex: job tokens and pool token secrets.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("the OS random source is available");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// True when `token` hashes to `hash` (a stored [`sha256_hex`]), compared in constant time:
/// how job tokens and pool tokens are checked, never kept in clear.
pub fn token_matches(hash: &str, token: &str) -> bool {
    let presented = sha256_hex(token.as_bytes());
    hash.len() == presented.len()
        && hash
            .bytes()
            .zip(presented.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// SHA-256 of bytes, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_lower_case_ulids_that_sort_by_time() {
        let a = new_id();
        assert_eq!(a.len(), 26);
        assert_eq!(a, a.to_lowercase());
    }

    #[test]
    fn random_hex_has_two_characters_per_byte_and_differs() {
        let a = random_hex(16);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(a, random_hex(16));
    }

    #[test]
    fn a_token_matches_only_its_own_hash() {
        let hash = sha256_hex(b"secret");
        assert!(token_matches(&hash, "secret"));
        assert!(!token_matches(&hash, "secreT"));
        assert!(!token_matches(&hash[..10], "secret"));
    }

    #[test]
    fn sha256_of_abc_is_the_known_digest() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
