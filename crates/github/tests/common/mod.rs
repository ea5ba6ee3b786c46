//! What the GitHub client's test binaries share: the double with one pull request, and a
//! client of it.

use sortie_github::{AppCredentials, Github, RepoRef};
use sortie_testkit::github::{GithubDouble, PullSpec};

pub const REPO: &str = "acme/infra";

pub fn repo(name: &str) -> RepoRef {
    RepoRef::parse(name).unwrap()
}

pub fn client(double: &GithubDouble) -> Github {
    Github::new(
        double.url(),
        AppCredentials {
            app_id: double.app_id(),
            private_key_pem: double.app_private_key_pem(),
        },
    )
    .expect("a client")
}

/// A double with the app installed on [`REPO`] and pull request 1 (alice's, at `h1`), and
/// a client for it.
pub async fn one_pull() -> (GithubDouble, Github) {
    let double = GithubDouble::start().await;
    double.install(REPO);
    double.add_pull(REPO, PullSpec::new("alice", "h1"));
    let github = client(&double);
    (double, github)
}
