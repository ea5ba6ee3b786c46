//! No token of the GitHub client reaches its errors, its logs or its debug output. A
//! binary of its own: the test captures `tracing` with a scoped subscriber, and another
//! test's thread registering the same log call site at the same moment could cache it as
//! never wanted (seen once on a loaded fresh clone: the calls were not logged).

use std::sync::{Arc, Mutex};

use chrono::Utc;
use sortie_github::Permissions;

mod common;

use common::{one_pull, repo, REPO};

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
    let (double, github) = one_pull().await;
    let token = github
        .repository_token(&repo(REPO), &Permissions::PULLS_READ)
        .await
        .unwrap();
    let mut texts = vec![format!("{token:?}"), format!("{github:?}")];
    github.pull(&repo(REPO), 1).await.unwrap();
    double.fail_next(1, 500);
    github.pull(&repo(REPO), 1).await.unwrap();
    for err in [
        github.pull(&repo(REPO), 99).await.unwrap_err(),
        github
            .create_comment(&repo(REPO), 1, &"x".repeat(70_000))
            .await
            .unwrap_err(),
    ] {
        texts.push(err.to_string());
        texts.push(format!("{err:?}"));
    }
    double.expire_tokens();
    github.pull(&repo(REPO), 1).await.unwrap();
    let jwt = github.app_jwt(Utc::now()).unwrap();
    let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logged.contains("GitHub answered"),
        "the calls were logged: {logged}"
    );
    texts.push(logged);
    for text in &texts {
        assert!(!text.contains(&token.token), "a token leaked: {text}");
        assert!(!text.contains("ghs_"), "a token leaked: {text}");
        assert!(!text.contains(&jwt[..40]), "a JWT leaked: {text}");
    }
}
