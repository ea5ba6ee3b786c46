//! The harness: one `sortie dev` of a test's own, a Terraform working directory whose CLI
//! configuration points `sortie/sortie` at the provider under test (dev_overrides, no
//! registry), and plain HTTP calls to the API for out-of-band changes.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// Skips an AWS-tier test when no moto is set up (`scripts/with-moto.sh` sets the variable).
#[macro_export]
macro_rules! require_aws {
    () => {
        if std::env::var_os("SORTIE_TEST_AWS_ENDPOINT").is_none() {
            eprintln!(
                "skipped: SORTIE_TEST_AWS_ENDPOINT is unset (run under scripts/with-moto.sh)"
            );
            return;
        }
    };
}

/// A name no other test run uses.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{prefix}-{:x}-{}",
        nanos & 0xffff_ffff_ffff,
        std::process::id()
    )
}

/// A fresh scratch directory under the crate's `.work/` (git-ignored).
pub fn scratch(prefix: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".work")
        .join(unique(prefix));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The Terraform versions the provider is tested with: 1.0.3 (`SORTIE_TEST_TERRAFORM_1`)
/// and 1.11.4 (`SORTIE_TEST_TERRAFORM_111`). A missing one fails, never skips.
pub fn terraforms() -> Vec<(&'static str, PathBuf)> {
    [("1.0.3", "SORTIE_TEST_TERRAFORM_1"), ("1.11.4", "SORTIE_TEST_TERRAFORM_111")]
        .into_iter()
        .map(|(version, var)| {
            let path = std::env::var_os(var).filter(|v| !v.is_empty()).unwrap_or_else(|| {
                panic!("{var} is unset: the provider tests need Terraform {version} (scripts/with-moto.sh sets it)")
            });
            let path = PathBuf::from(path);
            assert!(path.is_file(), "{var}={} is not a file (Terraform {version})", path.display());
            (version, path)
        })
        .collect()
}

/// The `sortie` binary: `SORTIE_TEST_SORTIE`, else the one built next to the provider.
pub fn sortie_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("SORTIE_TEST_SORTIE") {
        return PathBuf::from(p);
    }
    let sibling =
        PathBuf::from(env!("CARGO_BIN_EXE_terraform-provider-sortie")).with_file_name("sortie");
    assert!(
        sibling.is_file(),
        "{} is missing: build it first (`cargo build -p sortie-cli --bin sortie`) or set SORTIE_TEST_SORTIE",
        sibling.display()
    );
    sibling
}

/// A running `sortie dev`, killed on drop.
pub struct Dev {
    child: Child,
    /// The API's base URL.
    pub url: String,
    /// The development token.
    pub token: String,
    /// Its work directory.
    pub dir: PathBuf,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            // Passed: nothing to inspect.
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("--- sortie dev log (tail) ---");
            let log = std::fs::read_to_string(self.dir.join("dev.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

impl Dev {
    /// Starts one on fresh names and waits for its ready file.
    pub fn start(prefix: &str) -> Dev {
        Dev::start_with(prefix, &[])
    }

    /// Starts one with extra arguments (`--runner PILOT`, say).
    pub fn start_with(prefix: &str, extra: &[&std::ffi::OsStr]) -> Dev {
        let dir = scratch(prefix);
        let ready = dir.join("ready.json");
        let log = std::fs::File::create(dir.join("dev.log")).unwrap();
        let child = Command::new(sortie_binary())
            .args(["dev", "--sweep-every", "5"])
            .args(["--table", &unique("sortie-tfp")])
            .args(["--queue", &unique("jobs")])
            .args(["--bucket", &unique("artifacts")])
            .args(["--bus", &unique("bus")])
            .arg("--work-dir")
            .arg(&dir)
            .arg("--ready-file")
            .arg(&ready)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start sortie dev");
        let mut dev = Dev {
            child,
            url: String::new(),
            token: String::new(),
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::fs::read_to_string(&ready)
            .unwrap_or_default()
            .is_empty()
        {
            assert!(Instant::now() < deadline, "sortie dev did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap();
        dev.url = r["url"].as_str().unwrap().into();
        dev.token = r["token"].as_str().unwrap().into();
        dev
    }

    /// One API call (plain HTTP/1.1): status and JSON body.
    pub fn api(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        if_match: Option<u64>,
    ) -> (u16, Value) {
        let host = self.url.trim_start_matches("http://");
        let mut s = TcpStream::connect(host).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.token,
            body.len()
        );
        if let Some(v) = if_match {
            req.push_str(&format!("If-Match: \"{v}\"\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        s.write_all(req.as_bytes()).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        let status: u16 = answer
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap();
        let (head, rest) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let text = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(rest)
        } else {
            rest.to_string()
        };
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    for _ in 0..10_000 {
        let Some((size, after)) = rest.split_once("\r\n") else {
            break;
        };
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
    out
}

/// A Terraform working directory bound to one Terraform binary and one `sortie dev`.
pub struct Tf {
    /// The binary.
    pub bin: PathBuf,
    /// The working directory.
    pub dir: PathBuf,
    cli_config: PathBuf,
    url: String,
    token: String,
}

/// Terraform's result: status, stdout and stderr.
pub struct Run {
    /// Exit code.
    pub code: i32,
    /// Stdout.
    pub out: String,
    /// Stderr.
    pub err: String,
}

impl Run {
    /// Both streams.
    pub fn all(&self) -> String {
        format!("{}\n{}", self.out, self.err)
    }
}

impl Tf {
    /// A working directory whose CLI configuration overrides `sortie/sortie` with the
    /// provider under test.
    pub fn new(bin: &Path, dev: &Dev, prefix: &str) -> Tf {
        let mut tf = Tf::new_at(bin, prefix);
        tf.url = dev.url.clone();
        tf.token = dev.token.clone();
        tf
    }

    fn new_at(bin: &Path, prefix: &str) -> Tf {
        let dir = scratch(prefix);
        let provider_dir = PathBuf::from(env!("CARGO_BIN_EXE_terraform-provider-sortie"));
        let cli_config = dir.join("terraformrc");
        std::fs::write(
            &cli_config,
            format!(
                "provider_installation {{\n  dev_overrides {{\n    \"sortie/sortie\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
                provider_dir.parent().unwrap().display()
            ),
        )
        .unwrap();
        Tf {
            bin: bin.to_path_buf(),
            dir,
            cli_config,
            url: String::new(),
            token: String::new(),
        }
    }

    /// A working directory for commands that need no API (`validate`).
    pub fn offline(bin: &Path, prefix: &str) -> Tf {
        let mut tf = Tf::new_at(bin, prefix);
        tf.url = "http://127.0.0.1:9".into();
        tf
    }

    /// Writes `main.tf`: the provider block (from the environment) and `body`.
    pub fn write(&self, body: &str) {
        let text = format!(
            "terraform {{\n  required_providers {{\n    sortie = {{ source = \"sortie/sortie\" }}\n  }}\n}}\n\nprovider \"sortie\" {{}}\n\n{body}\n"
        );
        std::fs::write(self.dir.join("main.tf"), text).unwrap();
    }

    /// Runs `terraform ARGS` in the directory.
    pub fn run(&self, args: &[&str]) -> Run {
        let out: Output = Command::new(&self.bin)
            .args(args)
            .current_dir(&self.dir)
            .env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("TF_IN_AUTOMATION", "1")
            .env("CHECKPOINT_DISABLE", "1")
            .env("SORTIE_API_URL", &self.url)
            .env("SORTIE_TOKEN", &self.token)
            .env_remove("TF_LOG")
            .stdin(Stdio::null())
            .output()
            .expect("run terraform");
        Run {
            code: out.status.code().unwrap_or(-1),
            out: String::from_utf8_lossy(&out.stdout).into_owned(),
            err: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs and asserts success.
    pub fn ok(&self, args: &[&str]) -> Run {
        let r = self.run(args);
        assert_eq!(
            r.code,
            0,
            "terraform {} failed:\n{}",
            args.join(" "),
            r.all()
        );
        r
    }

    /// `terraform plan -detailed-exitcode`: 0 no changes, 2 changes; the output.
    pub fn plan(&self) -> Run {
        let r = self.run(&["plan", "-input=false", "-no-color", "-detailed-exitcode"]);
        assert!(
            r.code == 0 || r.code == 2,
            "terraform plan failed:\n{}",
            r.all()
        );
        r
    }

    /// `terraform apply -auto-approve`.
    pub fn apply(&self) -> Run {
        self.ok(&["apply", "-input=false", "-no-color", "-auto-approve"])
    }
}
