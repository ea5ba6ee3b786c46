//! `sortie dev --data-dir`: the world `sortie dev` made on the local AWS, kept on disk.
//!
//! moto is an external process that forgets everything when it stops, so `sortie dev`
//! snapshots, through the ordinary SDK, what it needs to come back: every item of its
//! table (a paged Scan) and every object of the buckets it knows (its artifacts bucket and
//! the buckets of runners' `s3` state storage), bodies included. The table is read first
//! and the buckets second, in the same pass: a job that the records say ended wrote its
//! state before it reported, so the state in a snapshot is never older than its records.
//!
//! On disk, under `DIR/snapshot/`:
//! - `world.json`: a [`World`] (the items in DynamoDB's JSON form, and each object's key,
//!   size, content type and the SHA-256 of its body), replaced atomically (temp + rename);
//! - `objects/<sha256>`: the bodies, content-addressed, each written once (temp + rename)
//!   before the `world.json` naming it, and removed once no `world.json` names it.
//!
//! At start, when the table does not exist yet and a snapshot does, the table and the
//! buckets are created again and filled from it ([`restore`]). Every loop is bounded.

mod disk;
mod item;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};

pub use self::disk::{read_world, snapshot_dir};
use self::disk::{store_body, write_world, BucketSnapshot, ObjectEntry, World, FORMAT};
use self::item::{item_from_sdk, item_to_sdk, rebase_endpoint, Attr, ItemJson, SdkItem};

/// Pages read at most from one Scan or one ListObjectsV2 (1 MB or 1,000 keys a page).
const MAX_PAGES: usize = 10_000;

/// BatchWriteItem takes at most this many writes.
const BATCH: usize = 25;

/// Attempts of one batch while DynamoDB hands back unprocessed items.
const BATCH_ATTEMPTS: u32 = 8;

/// The buckets of the runners' `s3` state storage among `items` (runner items are
/// `kind = runner`, with the runner's fields flattened into the item).
pub fn runner_state_buckets(items: &[SdkItem]) -> BTreeSet<String> {
    items
        .iter()
        .filter(|i| matches!(i.get("kind"), Some(AttributeValue::S(k)) if k == "runner"))
        .filter_map(|i| serde_dynamo::from_item::<_, serde_json::Value>(i.clone()).ok())
        .filter_map(|v| {
            let storage = &v["state_storage_configuration"];
            (storage["type"] == "s3")
                .then(|| storage["bucket"].as_str().map(str::to_string))
                .flatten()
        })
        .collect()
}

/// Takes snapshots of one table and the buckets `sortie dev` knows, into one data dir.
pub struct Snapshotter {
    endpoint: Option<String>,
    dynamo: aws_sdk_dynamodb::Client,
    s3: aws_sdk_s3::Client,
    table: String,
    /// Buckets always kept (the artifacts bucket).
    buckets: Vec<String>,
    dir: PathBuf,
    /// `(bucket, key)` → `(ETag, size, sha256)` of bodies already kept.
    known: HashMap<(String, String), (String, i64, String)>,
    /// The last world written, to write only a change.
    last: Option<World>,
}

impl Snapshotter {
    /// A snapshotter of `table` and `buckets` (plus runners' state buckets) into `dir`.
    pub fn new(
        endpoint: Option<String>,
        dynamo: aws_sdk_dynamodb::Client,
        s3: aws_sdk_s3::Client,
        table: String,
        buckets: Vec<String>,
        dir: PathBuf,
    ) -> Self {
        Self {
            endpoint,
            dynamo,
            s3,
            table,
            buckets,
            dir,
            known: HashMap::new(),
            last: None,
        }
    }

    /// One pass: the table, then the buckets; written when it differs from the last one.
    /// Returns whether a snapshot was written.
    pub async fn take(&mut self) -> anyhow::Result<bool> {
        let items = scan_all(&self.dynamo, &self.table).await?;
        let mut names: BTreeSet<String> = self.buckets.iter().cloned().collect();
        names.extend(runner_state_buckets(&items));
        let mut buckets = Vec::new();
        for name in names {
            match self.bucket(&name).await {
                Ok(Some(b)) => buckets.push(b),
                Ok(None) => {}
                Err(e) => return Err(e.context(format!("reading bucket {name}"))),
            }
        }
        let mut json_items = Vec::with_capacity(items.len());
        for item in &items {
            match item_from_sdk(item) {
                Some(i) => json_items.push(i),
                None => anyhow::bail!("an item of {} has a value of an unknown kind", self.table),
            }
        }
        json_items.sort_by_key(key_of);
        let world = World {
            format: FORMAT,
            table: self.table.clone(),
            endpoint: self.endpoint.clone(),
            items: json_items,
            buckets,
        };
        if self.last.as_ref() == Some(&world) {
            return Ok(false);
        }
        let dir = self.dir.clone();
        let written = world.clone();
        tokio::task::spawn_blocking(move || write_world(&dir, &written)).await??;
        self.last = Some(world);
        Ok(true)
    }

    /// One bucket's objects, their new bodies kept; `None` when the bucket is gone.
    async fn bucket(&mut self, name: &str) -> anyhow::Result<Option<BucketSnapshot>> {
        let mut objects = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let page = match self
                .s3
                .list_objects_v2()
                .bucket(name)
                .set_continuation_token(token.clone())
                .send()
                .await
            {
                Ok(p) => p,
                Err(e) => {
                    let gone = e.as_service_error().is_some_and(|s| s.is_no_such_bucket())
                        || e.raw_response().is_some_and(|r| r.status().as_u16() == 404);
                    if gone {
                        return Ok(None);
                    }
                    return Err(anyhow::anyhow!(
                        aws_sdk_s3::error::DisplayErrorContext(e).to_string()
                    ));
                }
            };
            for o in page.contents() {
                let Some(key) = o.key() else { continue };
                let etag = o.e_tag().unwrap_or_default().to_string();
                let size = o.size().unwrap_or_default();
                let id = (name.to_string(), key.to_string());
                let content_type;
                let sha = match self.known.get(&id) {
                    Some((e, s, sha)) if *e == etag && *s == size => {
                        content_type = None;
                        sha.clone()
                    }
                    _ => {
                        let Ok(got) = self.s3.get_object().bucket(name).key(key).send().await
                        else {
                            // Deleted since the listing.
                            continue;
                        };
                        content_type = got.content_type().map(str::to_string);
                        let body = got.body.collect().await?.into_bytes();
                        let dir = self.dir.clone();
                        let sha =
                            tokio::task::spawn_blocking(move || store_body(&dir, &body)).await??;
                        self.known.insert(id, (etag, size, sha.clone()));
                        sha
                    }
                };
                let content_type = content_type.or_else(|| {
                    self.last
                        .as_ref()
                        .and_then(|w| w.buckets.iter().find(|b| b.name == name))
                        .and_then(|b| b.objects.iter().find(|x| x.key == key))
                        .and_then(|x| x.content_type.clone())
                });
                objects.push(ObjectEntry {
                    key: key.to_string(),
                    sha256: sha,
                    size: size.max(0) as u64,
                    content_type,
                });
            }
            match page.next_continuation_token() {
                Some(t) if page.is_truncated() == Some(true) => token = Some(t.to_string()),
                _ => {
                    return Ok(Some(BucketSnapshot {
                        name: name.to_string(),
                        objects,
                    }))
                }
            }
        }
        anyhow::bail!("bucket {name} has more than {MAX_PAGES} pages of objects")
    }
}

/// The sort key of an item in the snapshot: its `pk`, then its `sk`.
fn key_of(item: &ItemJson) -> (String, String) {
    let text = |name: &str| match item.get(name) {
        Some(Attr::S(s)) | Some(Attr::N(s)) => s.clone(),
        _ => String::new(),
    };
    (text("pk"), text("sk"))
}

/// Every item of `table`, with a consistent Scan paged to the end.
pub async fn scan_all(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
) -> anyhow::Result<Vec<SdkItem>> {
    let mut items = Vec::new();
    let mut start: Option<SdkItem> = None;
    for _ in 0..MAX_PAGES {
        let page = dynamo
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(|e| {
                anyhow::anyhow!(aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string())
            })
            .with_context(|| format!("scanning {table}"))?;
        items.extend(page.items().iter().cloned());
        match page.last_evaluated_key {
            Some(k) if !k.is_empty() => start = Some(k),
            _ => return Ok(items),
        }
    }
    anyhow::bail!("table {table} has more than {MAX_PAGES} pages of items")
}

/// Whether `table` exists on the local AWS.
pub async fn table_exists(dynamo: &aws_sdk_dynamodb::Client, table: &str) -> bool {
    dynamo
        .describe_table()
        .table_name(table)
        .send()
        .await
        .is_ok()
}

/// What a restore put back.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    /// Table items written.
    pub items: usize,
    /// Objects written.
    pub objects: usize,
}

/// Puts `world` back: its items into `table` (which must exist, empty) in batches of 25,
/// unprocessed items retried a bounded number of times, and its buckets, created if
/// missing, with their objects' bodies from `dir`. The snapshot's endpoint in the items
/// becomes `endpoint` ([`rebase_endpoint`]).
pub async fn restore(
    dynamo: &aws_sdk_dynamodb::Client,
    s3: &aws_sdk_s3::Client,
    table: &str,
    world: &World,
    dir: &Path,
    endpoint: Option<&str>,
) -> anyhow::Result<Restored> {
    let mut restored = Restored::default();
    let items: Vec<SdkItem> = world
        .items
        .iter()
        .map(|i| {
            let mut i = i.clone();
            if let (Some(from), Some(to)) = (world.endpoint.as_deref(), endpoint) {
                if from != to {
                    i.values_mut().for_each(|a| rebase_endpoint(a, from, to));
                }
            }
            item_to_sdk(&i).context("a snapshot item has a binary value that is not hex")
        })
        .collect::<anyhow::Result<_>>()?;
    for chunk in items.chunks(BATCH) {
        let mut writes: Vec<WriteRequest> = chunk
            .iter()
            .map(|item| {
                PutRequest::builder()
                    .set_item(Some(item.clone()))
                    .build()
                    .map(|p| WriteRequest::builder().put_request(p).build())
            })
            .collect::<Result<_, _>>()?;
        let mut attempt = 0;
        while !writes.is_empty() {
            attempt += 1;
            if attempt > BATCH_ATTEMPTS {
                anyhow::bail!(
                    "restoring {table}: {} items still unprocessed after {BATCH_ATTEMPTS} attempts",
                    writes.len()
                );
            }
            let n = writes.len();
            let out = dynamo
                .batch_write_item()
                .request_items(table, writes)
                .send()
                .await
                .map_err(|e| {
                    anyhow::anyhow!(aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string())
                })
                .with_context(|| format!("restoring {table}"))?;
            writes = out
                .unprocessed_items
                .and_then(|mut u| u.remove(table))
                .unwrap_or_default();
            restored.items += n - writes.len();
            if !writes.is_empty() {
                tokio::time::sleep(Duration::from_millis(100 << attempt.min(4))).await;
            }
        }
    }
    let objects = snapshot_dir(dir).join("objects");
    for bucket in &world.buckets {
        if s3.head_bucket().bucket(&bucket.name).send().await.is_err() {
            s3.create_bucket()
                .bucket(&bucket.name)
                .send()
                .await
                .map_err(|e| anyhow::anyhow!(aws_sdk_s3::error::DisplayErrorContext(e).to_string()))
                .with_context(|| format!("creating bucket {}", bucket.name))?;
        }
        for o in &bucket.objects {
            let path = objects.join(&o.sha256);
            let body = std::fs::read(&path)
                .with_context(|| format!("reading {} for {}", path.display(), o.key))?;
            s3.put_object()
                .bucket(&bucket.name)
                .key(&o.key)
                .set_content_type(o.content_type.clone())
                .body(body.into())
                .send()
                .await
                .map_err(|e| anyhow::anyhow!(aws_sdk_s3::error::DisplayErrorContext(e).to_string()))
                .with_context(|| format!("restoring s3://{}/{}", bucket.name, o.key))?;
            restored.objects += 1;
        }
    }
    Ok(restored)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::disk::*;
    use super::item::*;
    use super::*;

    fn every_kind() -> ItemJson {
        BTreeMap::from([
            ("pk".into(), Attr::S("GROUP#acme".into())),
            ("sk".into(), Attr::S("RUNNER#local".into())),
            ("version".into(), Attr::N("3".into())),
            ("blob".into(), Attr::B("00ff10".into())),
            ("flag".into(), Attr::Bool(true)),
            ("nothing".into(), Attr::Null(true)),
            ("tags".into(), Attr::Ss(vec!["a".into(), "b".into()])),
            ("nums".into(), Attr::Ns(vec!["1".into(), "2.5".into()])),
            ("blobs".into(), Attr::Bs(vec!["01".into(), "".into()])),
            (
                "list".into(),
                Attr::L(vec![
                    Attr::S("x".into()),
                    Attr::M(BTreeMap::from([("deep".into(), Attr::N("7".into()))])),
                ]),
            ),
        ])
    }

    #[test]
    fn every_kind_of_value_survives_the_sdk_and_the_file_both_ways() {
        let item = every_kind();
        let sdk = item_to_sdk(&item).unwrap();
        assert_eq!(
            sdk["blob"],
            AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(vec![0, 255, 16]))
        );
        assert_eq!(item_from_sdk(&sdk).unwrap(), item);
        let world = World {
            format: FORMAT,
            table: "t".into(),
            endpoint: Some("http://127.0.0.1:1".into()),
            items: vec![item],
            buckets: vec![BucketSnapshot {
                name: "b".into(),
                objects: vec![ObjectEntry {
                    key: "sortie/acme/terraform.tfstate".into(),
                    sha256: sha256_hex(b"state"),
                    size: 5,
                    content_type: Some("application/json".into()),
                }],
            }],
        };
        let text = serde_json::to_string(&world).unwrap();
        assert!(text.contains(r#""BOOL":true"#) && text.contains(r#""S":"GROUP#acme""#));
        assert_eq!(serde_json::from_str::<World>(&text).unwrap(), world);
    }

    #[test]
    fn only_strings_that_are_the_old_endpoint_are_rebased_at_any_depth() {
        let mut item = Attr::M(BTreeMap::from([
            ("endpoint".into(), Attr::S("http://127.0.0.1:4566".into())),
            (
                "deep".into(),
                Attr::L(vec![Attr::M(BTreeMap::from([(
                    "endpoint".into(),
                    Attr::S("http://127.0.0.1:4566/".into()),
                )]))]),
            ),
            ("note".into(), Attr::S("see http://127.0.0.1:4566".into())),
            ("other".into(), Attr::S("http://127.0.0.1:45661".into())),
        ]));
        rebase_endpoint(&mut item, "http://127.0.0.1:4566", "http://127.0.0.1:5000");
        let text = serde_json::to_string(&item).unwrap();
        assert_eq!(text.matches("http://127.0.0.1:5000").count(), 2, "{text}");
        assert!(text.contains("see http://127.0.0.1:4566"), "{text}");
        assert!(text.contains("http://127.0.0.1:45661"), "{text}");
    }

    #[test]
    fn binary_that_is_not_hex_is_refused_not_guessed() {
        assert_eq!(attr_to_sdk(&Attr::B("0".into())), None);
        assert_eq!(attr_to_sdk(&Attr::B("zz".into())), None);
        assert_eq!(unhex("a1B2"), Some(vec![0xa1, 0xb2]));
    }

    #[test]
    fn a_written_world_reads_back_and_bodies_it_no_longer_names_are_removed() {
        let dir = std::env::temp_dir().join(format!(
            "sortie-snapshot-{}-{}",
            std::process::id(),
            sortie_core::tokens::random_hex(4)
        ));
        assert!(read_world(&dir).unwrap().is_none(), "no snapshot yet");
        let old = store_body(&dir, b"old state").unwrap();
        let new = store_body(&dir, b"new state").unwrap();
        assert_eq!(new, sha256_hex(b"new state"));
        let world = World {
            format: FORMAT,
            table: "t".into(),
            endpoint: Some("http://127.0.0.1:1".into()),
            items: vec![every_kind()],
            buckets: vec![BucketSnapshot {
                name: "b".into(),
                objects: vec![ObjectEntry {
                    key: "k".into(),
                    sha256: new.clone(),
                    size: 9,
                    content_type: None,
                }],
            }],
        };
        write_world(&dir, &world).unwrap();
        assert_eq!(read_world(&dir).unwrap(), Some(world));
        let objects = snapshot_dir(&dir).join("objects");
        assert!(objects.join(&new).exists());
        assert!(!objects.join(&old).exists(), "an unnamed body is removed");
        assert_eq!(std::fs::read(objects.join(&new)).unwrap(), b"new state");
        let leftovers: Vec<_> = std::fs::read_dir(snapshot_dir(&dir))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("tmp-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        std::fs::write(
            snapshot_dir(&dir).join("world.json"),
            r#"{"format": 99, "table": "t", "items": [], "buckets": []}"#,
        )
        .unwrap();
        let err = read_world(&dir).unwrap_err().to_string();
        assert!(err.contains("format 99"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_state_buckets_are_read_from_runner_items_only() {
        let runner = |kind: &str, storage: serde_json::Value| -> SdkItem {
            serde_dynamo::to_item(serde_json::json!({
                "pk": "GROUP#acme", "sk": format!("RUNNER#{kind}"), "kind": kind,
                "id": "acme/local", "runner_configuration": {"type": "local"}, "state_storage_configuration": storage,
            }))
            .unwrap()
        };
        let s3 = |bucket: &str| serde_json::json!({"type": "s3", "bucket": bucket, "region": "us-east-1"});
        let found = runner_state_buckets(&[
            runner("runner", s3("state-a")),
            runner("job", s3("not-a-runner")),
            runner(
                "runner",
                serde_json::json!({"type": "local", "directory": "/tmp/x"}),
            ),
            runner("runner", s3("state-b")),
        ]);
        assert_eq!(
            found,
            BTreeSet::from(["state-a".to_string(), "state-b".to_string()])
        );
    }
}
