//! The `Artifacts` contract: every case runs on S3 on moto (with and without
//! `s3:ListBucket`, and with short listing pages) and on the in-memory bucket
//! (`sortie_testkit::fakes::MemoryArtifacts`), through the trait. A test file calls
//! [`artifacts_suite!`] with an expression that makes a fresh, empty [`Subject`].

use std::sync::Arc;

use sortie_store::{Artifacts, PageFrom, StoreError};

/// A bucket under test, and what its reader may do.
pub struct Subject {
    /// The bucket, as its reader sees it.
    pub artifacts: Arc<dyn Artifacts>,
    /// Whether the reader has `s3:ListBucket` (the in-memory bucket always does).
    pub can_list: bool,
}

/// Writes one `#[tokio::test]` per contract case, each on a fresh subject made by `$make`.
macro_rules! artifacts_suite {
    ($make:expr) => {
        $crate::contract::artifacts::artifacts_suite!(@each $make;
            a_written_object_reads_back_whole_and_by_range,
            a_missing_key_is_not_found_or_a_final_missing_or_unreadable_error,
            a_listing_pages_to_its_end_in_key_order_however_short_its_pages,
        );
    };
    (@each $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                $crate::contract::artifacts::$name($make).await;
            }
        )*
    };
}
pub(crate) use artifacts_suite;

/// An object reads back whole, and by range: inside, across its end (fewer bytes), and
/// from its end or past it (no bytes, not an error).
pub async fn a_written_object_reads_back_whole_and_by_range(s: Subject) {
    let a = &s.artifacts;
    let bytes: Vec<u8> = (0..100u8).collect();
    a.write("logs/j/000000000000.log", bytes.clone(), "text/plain")
        .await
        .unwrap();
    let key = "logs/j/000000000000.log";
    assert_eq!(a.get(key).await.unwrap(), bytes);
    assert_eq!(a.get_range(key, 10, 5).await.unwrap(), bytes[10..15]);
    assert_eq!(a.get_range(key, 0, 100).await.unwrap(), bytes);
    assert_eq!(
        a.get_range(key, 95, 50).await.unwrap(),
        bytes[95..],
        "a range across the end: the bytes up to it"
    );
    assert!(a.get_range(key, 10, 0).await.unwrap().is_empty());
    for from in [100, 101, 1 << 40, u64::MAX - 1] {
        assert_eq!(
            a.get_range(key, from, 10).await.unwrap(),
            Vec::<u8>::new(),
            "a range from {from}, at or past the end: no bytes"
        );
    }
    a.write("artifacts/j/empty.json", vec![], "application/json")
        .await
        .unwrap();
    assert!(a.get("artifacts/j/empty.json").await.unwrap().is_empty());
    assert!(a
        .get_range("artifacts/j/empty.json", 0, 10)
        .await
        .unwrap()
        .is_empty());
}

/// A missing key is `NotFound` to a reader with `s3:ListBucket`. To one without it, S3
/// answers 403 for a missing key as for a forbidden one: a final (not retryable) error
/// that names the key as missing or unreadable. Never a retryable error either way, so no
/// caller retries a missing `plan.json` for ever.
pub async fn a_missing_key_is_not_found_or_a_final_missing_or_unreadable_error(s: Subject) {
    let a = &s.artifacts;
    a.write(
        "artifacts/j/outputs.json",
        b"{}".to_vec(),
        "application/json",
    )
    .await
    .unwrap();
    let key = "artifacts/j/plan.json";
    let ranged = a.get_range(key, 0, 10).await;
    for (what, got) in [
        ("get", a.get(key).await.map(|_| ())),
        ("get_range", ranged.map(|_| ())),
    ] {
        let err = got.expect_err(what);
        assert!(!err.is_retryable(), "{what}: {err}");
        match (&err, s.can_list) {
            (StoreError::NotFound { kind, id }, true) => {
                assert_eq!((*kind, id.as_str()), ("object", key), "{what}")
            }
            (StoreError::Aws { message, .. }, false) => {
                assert!(
                    message.contains("missing or unreadable") && message.contains(key),
                    "{what}: {message}"
                )
            }
            _ => panic!(
                "{what}: a reader {} s3:ListBucket got {err:?}",
                if s.can_list { "with" } else { "without" }
            ),
        }
    }
}

/// Pages of a listing hold at most what was asked, in key order, and the listing goes on
/// exactly while a page says so (`next`), however short a page is (S3 may answer short
/// pages); `After` starts after a key; other prefixes are not listed. A reader without
/// `s3:ListBucket` may not list: a final error.
pub async fn a_listing_pages_to_its_end_in_key_order_however_short_its_pages(s: Subject) {
    let a = &s.artifacts;
    let keys: Vec<String> = (0..25)
        .map(|i| format!("logs/j/{:012}.log", i * 7))
        .collect();
    for (i, key) in keys.iter().enumerate().rev() {
        a.write(key, vec![b'x'; i], "text/plain").await.unwrap();
    }
    a.write("logs/j2/000000000000.log", b"other".to_vec(), "text/plain")
        .await
        .unwrap();
    if !s.can_list {
        let err = a
            .list_page("logs/j/", PageFrom::Start, 10)
            .await
            .expect_err("a listing without s3:ListBucket");
        assert!(!err.is_retryable(), "{err}");
        return;
    }
    let (mut listed, mut pages) = (Vec::new(), 0);
    let mut page = a.list_page("logs/j/", PageFrom::Start, 10).await.unwrap();
    loop {
        pages += 1;
        assert!(page.objects.len() <= 10, "at most max_keys a page");
        listed.extend(page.objects.iter().map(|o| (o.key.clone(), o.size)));
        let Some(next) = page.next.take() else { break };
        assert!(pages < 100, "bounded");
        page = a
            .list_page("logs/j/", PageFrom::Next(&next), 10)
            .await
            .unwrap();
    }
    let want: Vec<(String, u64)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.clone(), i as u64))
        .collect();
    assert_eq!(listed, want, "every key once, in key order, with its size");
    assert!(pages >= 3, "25 keys at most 10 a page: {pages} pages");
    let all = a.list("logs/j/").await.unwrap();
    assert_eq!(
        all.into_iter().map(|o| (o.key, o.size)).collect::<Vec<_>>(),
        want
    );
    // After a key: from the next one.
    let mut after = Vec::new();
    let mut page = a
        .list_page("logs/j/", PageFrom::After(&keys[20]), 1000)
        .await
        .unwrap();
    loop {
        after.extend(page.objects.iter().map(|o| o.key.clone()));
        let Some(next) = page.next.take() else { break };
        page = a
            .list_page("logs/j/", PageFrom::Next(&next), 1000)
            .await
            .unwrap();
    }
    assert_eq!(after, keys[21..]);
    let none = a
        .list_page("logs/nothing/", PageFrom::Start, 10)
        .await
        .unwrap();
    assert!(none.objects.is_empty() && none.next.is_none());
}
