//! `sortie dev status`: whether a `sortie dev` runs for a data dir, and its health.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use super::data_dir;

/// `sortie dev status`: the data dir's `env` file, and whether its API answers.
pub(super) async fn status(dir: &Path) -> anyhow::Result<()> {
    let path = dir.join("env");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "no sortie dev has run with the data dir {} ({} is missing)",
            dir.display(),
            path.display()
        )
    })?;
    print!("{text}");
    let url = data_dir::url_of_env(&text)
        .with_context(|| format!("{} has no export line", path.display()))?;
    if health(url).await {
        println!("running at {url}");
        Ok(())
    } else {
        println!("not running");
        std::process::exit(1);
    }
}

/// Whether Sortie's `/v1/health` answers at `url` (`http://host:port`), within 3 s.
pub(super) async fn health(url: &str) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Some(authority) = url.strip_prefix("http://").map(|a| a.trim_end_matches('/')) else {
        return false;
    };
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(authority).await.ok()?;
        let request =
            format!("GET /v1/health HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = Vec::new();
        stream
            .take(64 * 1024)
            .read_to_end(&mut response)
            .await
            .ok()?;
        Some(data_dir::is_sortie_health(&String::from_utf8_lossy(
            &response,
        )))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(3), attempt).await,
        Ok(Some(true))
    )
}
