//! A restore's presigned URL of a state version lives no longer than the credentials that
//! sign it (issue 41): presigning is local, so no network is needed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::{future, ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use sortie_core::{EnvPath, RunnerSpec};

use super::{S3StateHistory, StateAt, StateHistory, UrlLife};

/// Credentials like a role session's: each call is a new session that expires `left` from
/// the call (`None`: long-term credentials, which do not expire).
#[derive(Debug)]
struct SessionOf {
    left: Option<Duration>,
    calls: Arc<AtomicUsize>,
}

impl ProvideCredentials for SessionOf {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        self.calls.fetch_add(1, Ordering::SeqCst);
        future::ProvideCredentials::ready(Ok(Credentials::new(
            "ASIAFAKE",
            "secret",
            Some("session-token".into()),
            self.left.map(|left| SystemTime::now() + left),
            "fake",
        )))
    }
}

/// A history whose own credentials are sessions of `left`, and how many it asked for.
fn signed_by(left: Option<Duration>) -> (S3StateHistory, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let base = SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(SharedCredentialsProvider::new(SessionOf {
            left,
            calls: calls.clone(),
        }))
        .build();
    (S3StateHistory::new(base), calls)
}

/// A `local` runner (read with the control plane's own credentials) with `s3` state.
fn local_runner() -> RunnerSpec {
    RunnerSpec::parse(
        "runner_configuration:\n  type: local\nstate_storage_configuration:\n  type: s3\n  bucket: state\n  key_prefix: pre/\n  region: us-east-1\n  endpoint: http://127.0.0.1:9\n",
    )
    .unwrap()
}

fn expires_param(url: &str) -> u64 {
    let (_, rest) = url.split_once("X-Amz-Expires=").expect("a presigned URL");
    rest.split('&').next().unwrap().parse().unwrap()
}

const MINUTE: Duration = Duration::from_secs(60);

/// A restore's: 15 minutes asked, 10 needed.
const RESTORE: UrlLife = UrlLife {
    wanted: Duration::from_secs(15 * 60),
    needed: Duration::from_secs(10 * 60),
};

#[tokio::test]
async fn a_restore_url_lives_no_longer_than_the_credentials_that_sign_it() {
    let env = EnvPath::parse("acme/app/b").unwrap();
    let runner = local_runner();
    let at = StateAt {
        environment: &env,
        runner_id: "acme/r",
        runner: &runner,
    };
    let asked = UrlLife {
        wanted: 15 * MINUTE,
        needed: MINUTE,
    };
    for minutes in [5u64, 12] {
        let (history, calls) = signed_by(Some(Duration::from_secs(minutes * 60)));
        let url = history.presign_get(at, "v1", asked).await.unwrap();
        let expires = expires_param(&url);
        assert!(
            expires <= minutes * 60 && expires + 2 >= minutes * 60,
            "X-Amz-Expires={expires}, but the credentials expire in {minutes} minutes"
        );
        assert!(url.contains("X-Amz-Security-Token=session-token"), "{url}");
        // Each URL is signed with credentials asked for then: a fresh session.
        history.presign_get(at, "v1", asked).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    // Credentials that last: the time asked, and never more than S3's 7 days.
    let (history, _) = signed_by(None);
    let url = history.presign_get(at, "v1", RESTORE).await.unwrap();
    assert_eq!(expires_param(&url), 15 * 60);
    let week = UrlLife {
        wanted: Duration::from_secs(30 * 24 * 60 * 60),
        needed: MINUTE,
    };
    let url = history.presign_get(at, "v1", week).await.unwrap();
    assert_eq!(expires_param(&url), 7 * 24 * 60 * 60);
}

#[tokio::test]
async fn no_restore_url_is_given_when_fresh_credentials_cannot_last_as_long_as_it_is_needed() {
    let env = EnvPath::parse("acme/app/b").unwrap();
    let runner = local_runner();
    let at = StateAt {
        environment: &env,
        runner_id: "acme/r",
        runner: &runner,
    };
    let (history, _) = signed_by(Some(11 * MINUTE));
    let url = history.presign_get(at, "v1", RESTORE).await.unwrap();
    assert!((600..=660).contains(&expires_param(&url)), "{url}");

    let (history, _) = signed_by(Some(3 * MINUTE));
    let e = history.presign_get(at, "v1", RESTORE).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("would work for only 1") // 179 or 180 s
            && e.to_string().contains("the restore needs it for 600 s"),
        "{e}"
    );
    assert!(!e.is_retryable(), "{e}");
}
