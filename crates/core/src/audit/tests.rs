use chrono::TimeZone;
use proptest::prelude::*;

use super::*;

fn entry(n: u64, subject: &str, action: &str) -> AuditEntry {
    AuditEntry {
        org: "acme".into(),
        id: format!("01JNX6V4K2M8Q9R3S5T7W0{n:04}"),
        at: Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap()
            + chrono::Duration::seconds(n as i64),
        actor: Actor {
            subject: subject.into(),
            issuer: Some("https://issuer.example.com".into()),
            credential: CredentialKind::User,
        },
        action: action.into(),
        target: format!("/v1/groups/acme/-/runners/r{n}"),
        request_id: String::new(),
        source_ip: Some("203.0.113.7".into()),
        user_agent: None,
        before: n.is_multiple_of(2).then(|| body_digest(b"before")),
        after: Some(body_digest(format!("after {n}").as_bytes())),
    }
}

/// A sealed chain of `entries`.
fn chain(entries: &[AuditEntry]) -> Vec<Stored> {
    let bodies: Vec<String> = entries.iter().map(entry_json).collect();
    let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
    seal("acme", None, &refs)
        .into_iter()
        .zip(bodies)
        .map(|(seal, body)| Stored { body, seal })
        .collect()
}

fn entries() -> impl Strategy<Value = Vec<AuditEntry>> {
    prop::collection::vec(("[a-z]{1,8}", "[a-z_]{3,16}"), 1..40).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (s, a))| entry(i as u64, &s, &a))
            .collect()
    })
}

#[test]
fn an_empty_chain_verifies_at_its_genesis_and_orgs_start_apart() {
    assert_eq!(
        verify("acme", &[]),
        Ok(Verified {
            entries: 0,
            head: genesis("acme")
        })
    );
    assert_ne!(genesis("acme"), genesis("beta"));
    // The same entries sealed for another organisation do not verify as acme's.
    let mut beta = chain(&[entry(1, "alice", "create_runner")]);
    let body = beta[0].body.clone();
    beta[0].seal = seal("beta", None, &[body.as_str()]).remove(0);
    assert_eq!(verify("acme", &beta), Err(Broken::Chain { seq: 1 }));
}

#[test]
fn a_chain_sealed_in_two_batches_is_the_chain_sealed_at_once() {
    let all: Vec<AuditEntry> = (0..5).map(|n| entry(n, "alice", "update_rule")).collect();
    let bodies: Vec<String> = all.iter().map(entry_json).collect();
    let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
    let at_once = seal("acme", None, &refs);
    let mut twice = seal("acme", None, &refs[..2]);
    let tail = seal("acme", twice.last(), &refs[2..]);
    twice.extend(tail);
    assert_eq!(at_once, twice);
}

proptest! {
    #[test]
    fn a_sealed_chain_verifies(entries in entries()) {
        let links = chain(&entries);
        let verified = verify("acme", &links).unwrap();
        prop_assert_eq!(verified.entries, entries.len() as u64);
        prop_assert_eq!(&verified.head, &links.last().unwrap().seal.hash);
    }

    /// Flipping one bit of one byte of one stored entry names that entry, whatever byte
    /// it is (even one that would read back as the same entry).
    #[test]
    fn one_flipped_byte_names_its_entry(entries in entries(), which in any::<prop::sample::Index>(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut links = chain(&entries);
        let i = which.index(links.len());
        let mut bytes = links[i].body.clone().into_bytes();
        let j = at.index(bytes.len());
        bytes[j] ^= 1 << bit;
        links[i].body = String::from_utf8_lossy(&bytes).into_owned();
        match verify("acme", &links) {
            Err(Broken::Edited { seq, .. }) => prop_assert_eq!(seq, i as u64 + 1),
            other => prop_assert!(false, "{:?}", other),
        }
    }

    /// Removing an entry (with its seal) is a gap; removing the last one is seen only
    /// against a head kept elsewhere (the export's), so the verified count says it.
    #[test]
    fn a_removed_entry_is_a_gap(entries in entries().prop_filter("two or more", |e| e.len() > 1), which in any::<prop::sample::Index>()) {
        let mut links = chain(&entries);
        let i = which.index(links.len() - 1);
        links.remove(i);
        prop_assert_eq!(
            verify("acme", &links),
            Err(Broken::Gap { after: i as u64, next: i as u64 + 2 })
        );
    }

    /// Renumbered seals hide no edit: moving entries and renumbering their seals breaks
    /// the chain where the first moved entry stands.
    #[test]
    fn reordered_entries_break_the_chain(entries in entries().prop_filter("two or more", |e| e.len() > 1), which in any::<prop::sample::Index>()) {
        let mut links = chain(&entries);
        let i = which.index(links.len() - 1);
        links.swap(i, i + 1);
        for (n, link) in links.iter_mut().enumerate() {
            link.seal.seq = n as u64 + 1;
        }
        prop_assert_eq!(verify("acme", &links), Err(Broken::Chain { seq: i as u64 + 1 }));
    }

    /// An entry rewritten with a fresh digest in its seal (but the old hash) breaks the
    /// chain at that entry.
    #[test]
    fn a_reseal_without_the_chain_breaks_it(entries in entries(), which in any::<prop::sample::Index>()) {
        let mut links = chain(&entries);
        let i = which.index(links.len());
        let mut forged: AuditEntry = serde_json::from_str(&links[i].body).unwrap();
        forged.actor.subject = "mallory".into();
        links[i].body = entry_json(&forged);
        links[i].seal.digest = entry_digest(&links[i].body);
        prop_assert_eq!(verify("acme", &links), Err(Broken::Chain { seq: i as u64 + 1 }));
    }
}

#[test]
fn a_broken_link_says_which_entry_in_words() {
    let links = chain(&[entry(1, "alice", "create_runner")]);
    let mut edited = links.clone();
    edited[0].body = edited[0].body.replace("alice", "mallo");
    let broken = verify("acme", &edited).unwrap_err();
    assert_eq!(
        broken.to_string(),
        "entry 1 (01JNX6V4K2M8Q9R3S5T7W00001) was edited after it was sealed"
    );
    let mut unreadable = links;
    unreadable[0].body.insert(0, '#');
    assert_eq!(
        verify("acme", &unreadable).unwrap_err().to_string(),
        "entry 1 (no longer readable) was edited after it was sealed"
    );
}

/// The first link of `acme`'s chain over one fixed entry, pinned: the console's verifier
/// (crates/console/js-tests/audit.test.mjs) checks the same figures, so both compute the
/// same chain.
#[test]
fn the_first_link_is_pinned_for_every_verifier() {
    let seals = seal("acme", None, &["{\"id\":\"01j1\"}"]);
    assert_eq!(
        genesis("acme"),
        "71a2b9f5f6119bdc60b1c437912df66aaa94b01b53c4b9d05cf8d52255dbd049"
    );
    assert_eq!(
        seals[0].digest,
        "21d6634963750e944a45cb9ff64971724e016666511cce0364bcc7db365b8a2c"
    );
    assert_eq!(
        seals[0].hash,
        "703ddf263661aaa67b5b0a5b3ca62abca7eb06e2917d484a6d4b06bea1af76ba"
    );
}
