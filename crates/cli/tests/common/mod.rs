//! One `sortie dev` of a test's own (fresh table, queue, bucket and bus), killed on drop,
//! its log printed when the test failed. Shared by the CLI's end-to-end tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A running `sortie dev`: its API URL, its development token and its work directory.
pub struct Dev {
    pub child: Child,
    pub url: String,
    pub token: String,
    pub dir: PathBuf,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- sortie dev log ---\n{}",
                std::fs::read_to_string(self.dir.join("dev.log")).unwrap_or_default()
            );
        }
    }
}

/// Starts `sortie dev` on fresh names in a scratch directory named after `prefix`, sweeping
/// every `sweep_every` seconds, with `runner` as the local runner binary when given.
pub fn launch(prefix: &str, sweep_every: u32, runner: Option<&Path>) -> Dev {
    let dir = sortie_tests::scratch_dir(prefix).unwrap();
    let ready = dir.join("ready.json");
    let log = std::fs::File::create(dir.join("dev.log")).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_sortie"));
    command
        .args(["dev", "--sweep-every", &sweep_every.to_string()])
        .args([
            "--table",
            &sortie_tests::unique(&format!("sortie-{prefix}")),
        ])
        .args(["--queue", &sortie_tests::unique("jobs")])
        .args(["--bucket", &sortie_tests::unique("artifacts")])
        .args(["--bus", &sortie_tests::unique("bus")])
        .arg("--ready-file")
        .arg(&ready)
        .arg("--work-dir")
        .arg(&dir);
    if let Some(runner) = runner {
        command.arg("--runner").arg(runner);
    }
    let child = command
        .env("AWS_ENDPOINT_URL", sortie_tests::endpoint())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start sortie dev");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&ready)
        .unwrap_or_default()
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "sortie dev did not start: {}",
            std::fs::read_to_string(dir.join("dev.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap();
    Dev {
        child,
        url: r["url"].as_str().unwrap().into(),
        token: r["token"].as_str().unwrap().into(),
        dir,
    }
}
