//! What `sortie dev` keeps in its data dir besides the snapshot: its port and tokens
//! (`dev.json`), and the `export` line with the CLI hints (`env`), which `sortie dev
//! status` prints again.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// The agent pool `sortie dev --agent` made, kept to start the same pool's agent again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedAgent {
    /// The `--agent` group.
    pub group: String,
    /// The pool's id.
    pub pool: String,
    /// The pool's token (its hash is in the pool record).
    pub token: String,
}

/// `DIR/dev.json`: what a restart of `sortie dev` reuses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saved {
    /// The API's last port.
    #[serde(default)]
    pub port: Option<u16>,
    /// The development token.
    #[serde(default)]
    pub token: Option<String>,
    /// The named users' tokens, by name.
    #[serde(default)]
    pub users: BTreeMap<String, String>,
    /// The dev agent's pool.
    #[serde(default)]
    pub agent: Option<SavedAgent>,
}

impl Saved {
    /// The saved identity with a development token, and a token for every user in `users`
    /// besides the saved ones (which stay: a restart to add a user loses none), each new
    /// one from `mint`.
    pub fn settle(mut self, users: &[String], mut mint: impl FnMut() -> String) -> Saved {
        if self.token.is_none() {
            self.token = Some(mint());
        }
        for name in users {
            if !self.users.contains_key(name) {
                self.users.insert(name.clone(), mint());
            }
        }
        self
    }
}

/// Reads `DIR/dev.json`; nothing saved yet is the default.
pub fn load(dir: &Path) -> anyhow::Result<Saved> {
    let path = dir.join("dev.json");
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not sortie dev's saved state", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Saved::default()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Writes `DIR/dev.json` atomically, readable by its owner only (it holds tokens).
pub fn save(dir: &Path, saved: &Saved) -> anyhow::Result<()> {
    write_private(&dir.join("dev.json"), &serde_json::to_vec_pretty(saved)?)
}

/// Writes `path` atomically (temp + rename), mode 0600 on Unix: the temporary file is
/// created new with that mode (a stale one left by a crash is removed first, since an
/// existing file keeps its own mode), never widened and narrowed after.
pub fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("removing {}", tmp.display()))
        }
        _ => {}
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    file.write_all(bytes)?;
    drop(file);
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The `export` line.
pub fn export_line(url: &str, token: &str) -> String {
    format!("export SORTIE_API_URL={url} SORTIE_TOKEN={token}")
}

/// `DIR/env`: the `export` line first (so `eval "$(sed -n 1p DIR/env)"` works), then the
/// hints as shell comments: the users' tokens, the agent pool, and the CLI's first steps.
pub fn env_text(
    url: &str,
    token: &str,
    users: &BTreeMap<String, String>,
    agent_pool: Option<&str>,
    dir: &Path,
) -> String {
    let mut text = export_line(url, token);
    text.push('\n');
    text.push_str(&format!(
        "# sortie dev at {url}, data in {}\n",
        dir.display()
    ));
    for (name, user_token) in users {
        text.push_str(&format!(
            "# as user {name}: export SORTIE_TOKEN={user_token}   (grant first: sortie members grant --group GROUP --subject {name} --role deployer)\n"
        ));
    }
    if let Some(pool) = agent_pool {
        text.push_str(&format!(
            "# agent pool {pool}: an `agent` runner names it (pool: {pool}); its log is {}\n",
            dir.join("agent.log").display()
        ));
    }
    text.push_str("# then: sortie whoami · sortie create runner acme/local -f runner.yaml · sortie create env acme/demo/hello --type development\n");
    text.push_str(&format!(
        "# again later: sortie dev status --data-dir {}\n",
        dir.display()
    ));
    text
}

/// The API URL of an `env` file's `export` line.
pub fn url_of_env(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|l| l.strip_prefix("export "))?
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("SORTIE_API_URL="))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new empty directory of this test's own.
    fn scratch(what: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "sortie-{what}-{}-{}",
            std::process::id(),
            sortie_core::tokens::random_hex(4)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_restart_keeps_every_token_and_mints_only_for_new_users() {
        let mut n = 0;
        let mut mint = || {
            n += 1;
            format!("t{n}")
        };
        let first = Saved::default().settle(&["bob".into()], &mut mint);
        assert_eq!(first.token.as_deref(), Some("t1"));
        assert_eq!(first.users["bob"], "t2");
        // Restarted with a new user only: bob stays, with his token.
        let second = first.clone().settle(&["carol".into()], &mut mint);
        assert_eq!(second.token, first.token);
        assert_eq!(second.users["bob"], "t2");
        assert_eq!(second.users["carol"], "t3");
        let third = second
            .clone()
            .settle(&["bob".into(), "carol".into()], &mut mint);
        assert_eq!(third, second, "nothing new, nothing minted");
    }

    #[test]
    fn saved_state_round_trips_privately_and_a_missing_file_is_nothing_saved() {
        let dir = scratch("devjson");
        assert_eq!(load(&dir).unwrap(), Saved::default());
        let saved = Saved {
            port: Some(4242),
            token: Some("abc".into()),
            users: BTreeMap::from([("bob".into(), "def".into())]),
            agent: Some(SavedAgent {
                group: "acme".into(),
                pool: "apool-1".into(),
                token: "ghi".into(),
            }),
        };
        save(&dir, &saved).unwrap();
        assert_eq!(load(&dir).unwrap(), saved);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("dev.json"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "tokens are private: {mode:o}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A private file is 0600 even where a file of the same name, or a stale temporary
    /// one from a crash, was world-readable.
    #[cfg(unix)]
    #[test]
    fn a_private_file_is_0600_over_a_readable_one_and_a_stale_temporary() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("private");
        let path = dir.join("ready.json");
        let stale = path.with_extension(format!("tmp-{}", std::process::id()));
        for p in [&path, &stale] {
            std::fs::write(p, "old").unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        write_private(&path, b"{\"token\":\"t\"}").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"token\":\"t\"}");
        assert!(!stale.exists(), "the temporary file is renamed into place");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_env_file_starts_with_the_export_line_status_reads_back() {
        let users = BTreeMap::from([("bob".to_string(), "tb".to_string())]);
        let text = env_text(
            "http://127.0.0.1:4242",
            "tok",
            &users,
            Some("apool-1"),
            Path::new(".sortie-dev"),
        );
        assert_eq!(
            text.lines().next(),
            Some("export SORTIE_API_URL=http://127.0.0.1:4242 SORTIE_TOKEN=tok")
        );
        assert!(text.contains("export SORTIE_TOKEN=tb"), "{text}");
        assert!(text.contains("apool-1"), "{text}");
        assert!(text.lines().skip(1).all(|l| l.starts_with('#')), "{text}");
        assert_eq!(url_of_env(&text), Some("http://127.0.0.1:4242"));
        assert_eq!(url_of_env("# nothing"), None);
    }

    #[test]
    fn only_a_200_with_sortie_health_body_counts_as_running() {
        use crate::client::is_sortie_health;
        use serde_json::{json, Value};
        assert!(is_sortie_health(200, &json!({"status": "ok"})));
        assert!(!is_sortie_health(
            200,
            &Value::String("<html>something else</html>".into())
        ));
        assert!(!is_sortie_health(404, &json!({"status": "ok"})));
        assert!(!is_sortie_health(200, &Value::Null));
    }
}
