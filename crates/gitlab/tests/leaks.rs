//! No token of the GitLab client (its own, or a source token it minted) reaches its errors,
//! its logs or its debug output. A binary of its own: the test captures `tracing` with a
//! scoped subscriber, and another test's thread registering the same log call site at the
//! same moment could cache it as never wanted.

use std::sync::{Arc, Mutex};

use chrono::Utc;
use sortie_gitlab::{CommitState, Gitlab, Secret, StatusBody};
use sortie_testkit::gitlab::MergeRequestSpec;

mod common;

use common::{project, setup, sha, PROJECT};

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn tokens_never_appear_in_errors_logs_or_debug_output() {
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_max_level(tracing::Level::TRACE)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let (double, gitlab, token) = setup().await;
    let head = sha('a');
    let iid = double.add_merge_request(PROJECT, MergeRequestSpec::new("alice", &head));
    let grant = gitlab
        .source_access(&project(), &head, "01jobone", Utc::now())
        .await
        .unwrap();
    let source = gitlab
        .create_source_token(&project(), "01jobtwo", Utc::now())
        .await
        .unwrap();
    let mut texts = vec![
        format!("{gitlab:?}"),
        format!("{grant:?}"),
        format!("{source:?}"),
        format!("{:?}", Secret::new(token.clone())),
    ];
    gitlab.merge_request(&project(), iid).await.unwrap();
    double.fail_next(1, 500);
    gitlab.merge_request(&project(), iid).await.unwrap();
    let running = StatusBody {
        name: "sortie: prod".into(),
        state: CommitState::Running,
        target_url: None,
        description: None,
        ref_name: None,
    };
    gitlab
        .set_status(&project(), &head, &running)
        .await
        .unwrap();
    gitlab
        .set_status(&project(), &head, &running)
        .await
        .unwrap();
    let refused = Gitlab::new(double.url(), Secret::new(source.token.expose())).unwrap();
    for err in [
        gitlab.merge_request(&project(), 99).await.unwrap_err(),
        refused
            .create_note(&project(), iid, "a source token cannot write")
            .await
            .unwrap_err(),
        Gitlab::new("http://10.0.0.1", Secret::new(token.clone())).unwrap_err(),
        Gitlab::new(double.url(), Secret::new(format!("{token}\n"))).unwrap_err(),
    ] {
        texts.push(err.to_string());
        texts.push(format!("{err:?}"));
    }
    let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logged.contains("GitLab answered"),
        "the calls were logged: {logged}"
    );
    texts.push(logged);
    for text in &texts {
        for secret in [
            &token,
            &grant.access.token,
            &source.token.expose().to_string(),
        ] {
            assert!(!text.contains(secret.as_str()), "a token leaked: {text}");
        }
    }
}
