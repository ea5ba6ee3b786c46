//! `sortie dev status`: whether a `sortie dev` runs for a data dir, and its health.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use sortie_client::{endpoints, Outgoing, Transport};

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
    if !url.starts_with("http://") {
        return false;
    }
    let Ok(transport) = Transport::new(url, crate::client::USER_AGENT) else {
        return false;
    };
    let transport = transport.with_timeout(Duration::from_secs(3));
    match transport.send(&endpoints::health(), Outgoing::new()).await {
        Ok(reply) => crate::client::is_sortie_health(reply.status.as_u16(), &reply.value()),
        Err(_) => false,
    }
}
