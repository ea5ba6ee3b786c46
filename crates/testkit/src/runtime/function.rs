//! The function under test: its binary, built once per process by Cargo, run as a
//! process pointed at the runtime double.

use super::*;

/// A running function binary; killed (and reaped) on drop.
pub struct FunctionProcess {
    pub(super) child: Child,
    pub(super) log_path: PathBuf,
    pub(super) name: String,
}

impl FunctionProcess {
    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Everything the function wrote to stdout and stderr so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The log file's path.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The exit status, if the process has exited.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for FunctionProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- {} logs ({}):\n{}",
                self.name,
                self.log_path.display(),
                self.logs()
            );
        } else {
            let _ = std::fs::remove_file(&self.log_path);
        }
    }
}

/// The compiled binary of the workspace package `package` (whose binary has
/// the same name, as every `functions/<name>` has). The first call in a process
/// runs `cargo build --workspace --bins --tests` (see the module's docs) and
/// keeps every binary Cargo reports; later calls return those paths.
///
/// Uses `$CARGO` (set by `cargo test`) and inherits `CARGO_TARGET_DIR`, so the
/// binary lands in the same target directory as the tests.
///
/// # Panics
///
/// When the build fails (with Cargo's output) or reports no executable for
/// `package`.
pub fn function_binary(package: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<Option<HashMap<String, PathBuf>>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = lock(built);
    let binaries = built.get_or_insert_with(build_workspace_binaries);
    binaries
        .get(package)
        .cloned()
        .unwrap_or_else(|| panic!("cargo built no executable for package `{package}`"))
}

/// Runs `cargo build --workspace --bins --tests` and maps each binary target's
/// name to its executable.
fn build_workspace_binaries() -> HashMap<String, PathBuf> {
    const ARGS: [&str; 4] = ["build", "--workspace", "--bins", "--tests"];
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(&cargo)
        .current_dir(crate::repo_root())
        .args(ARGS)
        .arg("--message-format=json-render-diagnostics")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {cargo:?}: {e}"));
    if !output.status.success() {
        panic!(
            "`cargo {}` failed ({}):\n{}",
            ARGS.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| {
            m["reason"] == "compiler-artifact"
                && m["profile"]["test"] == false
                && m["target"]["kind"] == serde_json::json!(["bin"])
        })
        .filter_map(|m| {
            let name = m["target"]["name"].as_str()?.to_string();
            Some((name, PathBuf::from(m["executable"].as_str()?)))
        })
        .collect()
}
