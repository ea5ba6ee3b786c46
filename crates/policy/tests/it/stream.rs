//! Issue 41 item 5: a plan streamed into the parser ([`PlanInput::from_reader`]), in reads of
//! any size, is read exactly as its bytes held whole ([`PlanInput::from_artifact`]): the
//! same value, or the same reason it is unavailable.

use proptest::prelude::*;
use sortie_policy::PlanInput;

/// Hands out `bytes` in reads of the given sizes (cycled), as ranges arrive from S3.
struct Chunked<'a> {
    bytes: &'a [u8],
    sizes: Vec<usize>,
    next: usize,
}

impl std::io::Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let size = self.sizes[self.next % self.sizes.len()].max(1);
        self.next += 1;
        let n = size.min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

fn same(a: &PlanInput, b: &PlanInput) -> bool {
    match (a, b) {
        (PlanInput::Available(x), PlanInput::Available(y)) => x == y,
        // Bad JSON is named by where each parser stopped (a cut UTF-8 sequence is found by
        // the slice's check first): the same sentence, its detail may differ.
        (PlanInput::Unavailable(x), PlanInput::Unavailable(y)) => {
            let bad = "the plan's JSON could not be read: ";
            x == y || (x.starts_with(bad) && y.starts_with(bad))
        }
        _ => false,
    }
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        "\\PC{0,12}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn a_streamed_plan_reads_as_its_bytes_held_whole(
        doc in json_value(),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
        sizes in prop::collection::vec(1usize..64, 1..8),
    ) {
        let mut bytes = serde_json::to_vec(&doc).unwrap();
        if truncate && !bytes.is_empty() {
            // A stream cut short (an object shorter than its HEAD said): bad JSON, either way.
            bytes.truncate(cut.index(bytes.len()));
        }
        let whole = PlanInput::from_artifact(Some(&bytes));
        let streamed = PlanInput::from_reader(Chunked { bytes: &bytes, sizes, next: 0 });
        prop_assert!(same(&whole, &streamed), "{whole:?} vs {streamed:?}");
    }
}

#[test]
fn the_runners_unavailable_object_is_its_reason_when_streamed() {
    let body = br#"{"unavailable": "plan data unavailable for Terraform 0.11"}"#;
    let streamed = PlanInput::from_reader(&body[..]);
    assert!(
        matches!(streamed, PlanInput::Unavailable(r) if r == "plan data unavailable for Terraform 0.11")
    );
}
