//! `sortie dev`: the four handlers in one process, against a local AWS on loopback.
//!
//! - the API router on 127.0.0.1, behind a development token;
//! - an SQS long-poller feeding real `SqsEvent` batches to the dispatch handler;
//! - `local` runners' exits, as ECS "Task State Change" events, to the task-events handler;
//! - the sweeper on a timer;
//! - with a data dir (`--data-dir`, default `.sortie-dev`): its port, tokens and world kept
//!   across restarts ([`snapshot`], [`data_dir`]).

mod data_dir;
mod snapshot;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sortie_launch::{AwsSecretValues, LocalLauncher};
use sortie_lifecycle::{EcsTaskStateChange, Engine, SweepSettings};
use sortie_store::SqsJobQueue;
use sortie_wiring::{compose, Resources};
use tokio::sync::mpsc;

/// Jobs-queue pollers running at once (Lambda's SQS event source mapping starts with 5).
const POLLERS: usize = 4;

/// Local task events handled at once.
const EVENTS_IN_FLIGHT: usize = 32;

/// Options of `sortie dev`.
#[derive(clap::Args, Debug, Clone)]
pub struct DevArgs {
    /// `status`: whether the `sortie dev` of a data dir is running, and its `export` line.
    #[command(subcommand)]
    command: Option<DevCommand>,
    /// Port for the API on 127.0.0.1 [default: the one this data dir used last, else a free
    /// one; 0 picks a free one].
    #[arg(long)]
    port: Option<u16>,
    /// DynamoDB table.
    #[arg(long, default_value = "sortie-dev")]
    table: String,
    /// SQS jobs queue name.
    #[arg(long, default_value = "sortie-dev-jobs")]
    queue: String,
    /// S3 bucket for logs and artifacts.
    #[arg(long, default_value = "sortie-dev-artifacts")]
    bucket: String,
    /// EventBridge bus for `sortie.job.completed`.
    #[arg(long, default_value = "sortie-dev")]
    bus: String,
    /// The `sortie-pilot` binary local runners start (default: next to this binary).
    #[arg(long, env = "SORTIE_RUNNER_BINARY")]
    runner: Option<PathBuf>,
    /// Where `sortie dev` keeps what survives a restart: its port and tokens, a snapshot of
    /// the table and buckets it uses, `env` (the `export` line), local runners' output and
    /// the agent's log.
    #[arg(long, visible_alias = "work-dir", default_value = ".sortie-dev")]
    data_dir: PathBuf,
    /// Seconds between snapshots of the table and buckets into the data dir (taken only
    /// after a change; one more at a clean stop). 0: only the one at a clean stop.
    #[arg(long, default_value_t = 2)]
    snapshot_every: u64,
    /// `json` (one object a line) or `human`; default: human on a terminal, else JSON.
    #[arg(long, value_name = "FORMAT", value_parser = ["json", "human"])]
    log_format: Option<String>,
    /// Seconds between sweeper passes.
    #[arg(long, default_value_t = 5)]
    sweep_every: u64,
    /// Seconds a job may stay `dispatching` before the sweeper looks its task up (and
    /// adopts it, or launches again).
    #[arg(long, default_value_t = 120)]
    dispatch_lease: i64,
    /// Write `{"url", "token", "users"}` here once ready (for scripts).
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// A named user besides the development identity (repeatable): it gets its own token,
    /// printed at start, and acts as subject `<name>` (issuer `sortie:local-dev-user`) with
    /// only the memberships granted to it: a second person to approve a reviewed job.
    #[arg(long = "user", value_name = "NAME")]
    users: Vec<String>,
    /// Start a `sortie-agent` beside the control plane, pulling the jobs of a new agent pool
    /// of this group (`agent` runners name the pool's id, printed at start).
    #[arg(long, value_name = "GROUP")]
    agent: Option<String>,
    /// Seconds a claimed job's heartbeat may stop before the sweeper ends it ("agent lost").
    #[arg(long, default_value_t = sortie_core::agent_pool::DEFAULT_AGENT_SILENCE_SECONDS)]
    agent_silence: i64,
}

/// `sortie dev` subcommands.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum DevCommand {
    /// Print the `export` line and hints of the data dir's `sortie dev`, and whether it runs:
    /// `running at URL` (its `/v1/health` answers) or `not running` (exit 1).
    Status {
        /// The data dir [default: the one given to `dev`, else `.sortie-dev`].
        #[arg(long = "data-dir", visible_alias = "work-dir")]
        data_dir: Option<PathBuf>,
    },
}

/// Installs `sortie dev`'s logs on stderr: `--log-format`, else human on a terminal and
/// JSON otherwise.
pub fn init_logs(args: &DevArgs) {
    use sortie_telemetry::LogFormat;
    use std::io::IsTerminal;
    let requested = match args.log_format.as_deref() {
        Some("json") => Some(LogFormat::Json),
        Some("human") => Some(LogFormat::Human),
        _ => None,
    };
    let format = LogFormat::pick(requested, std::io::stderr().is_terminal());
    sortie_telemetry::init_with_format(format, std::io::stderr);
}

/// The issuer of `sortie dev`'s named users.
pub const DEV_USER_ISSUER: &str = "sortie:local-dev-user";

/// Creates an agent pool in `group` with one token (or takes the data dir's pool of that
/// group again, when it is still in the store), and starts `sortie-agent` (next to this
/// binary) pulling its jobs, with the token in a file of the data dir.
async fn start_agent(
    store: &dyn sortie_store::AgentPoolStore,
    group: &str,
    url: &str,
    args: &DevArgs,
    saved: Option<&data_dir::SavedAgent>,
) -> anyhow::Result<(data_dir::SavedAgent, tokio::process::Child)> {
    use sortie_core::agent_pool::{AgentPool, POOL_ID_PREFIX};
    let kept = match saved.filter(|a| a.group == group) {
        Some(a) if store.get_pool(&a.pool).await.is_ok() => Some(a.clone()),
        _ => None,
    };
    let (id, token) = match kept {
        Some(a) => (a.pool, a.token),
        None => {
            let group = sortie_core::GroupPath::parse(group)
                .map_err(|e| anyhow::anyhow!("--agent: {e}"))?;
            let id = format!("{POOL_ID_PREFIX}{}", sortie_core::tokens::new_id());
            let by = sortie_core::Principal::local_dev().subject;
            let (token, stored) = sortie_store::PoolToken::mint(&id, &by);
            let record = sortie_store::AgentPoolRecord {
                pool: AgentPool {
                    id: id.clone(),
                    group,
                    name: "dev-agents".into(),
                    description: "the agent `sortie dev --agent` starts".into(),
                    oidc: None,
                },
                tokens: vec![stored],
                created_at: chrono::Utc::now(),
                created_by: by,
                last_claim_at: None,
            };
            store
                .create_pool(&record)
                .await
                .context("creating the agent pool")?;
            (id, token)
        }
    };
    std::fs::create_dir_all(&args.data_dir)?;
    let token_file = args.data_dir.join("agent-token");
    data_dir::write_private(&token_file, token.as_bytes())?;
    let exe = std::env::current_exe()?;
    let binary = exe.with_file_name("sortie-agent");
    let log = std::fs::File::create(args.data_dir.join("agent.log"))?;
    let mut command = tokio::process::Command::new(&binary);
    command
        .args(["--api-url", url, "--pool", &id, "--name", "dev-agent"])
        .arg("--token-file")
        .arg(&token_file)
        .arg("--work-dir")
        .arg(args.data_dir.join("agent"))
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    if let Some(runner) = &args.runner {
        command.arg("--runner-binary").arg(runner);
    }
    let child = command
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let saved = data_dir::SavedAgent {
        group: group.to_string(),
        pool: id,
        token,
    };
    Ok((saved, child))
}

/// Runs the local control plane until Ctrl-C or SIGTERM (or, for `dev status`, prints the
/// data dir's `env` and whether it runs).
pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    if let Some(DevCommand::Status { data_dir }) = &args.command {
        return status(data_dir.as_deref().unwrap_or(args.data_dir.as_path())).await;
    }
    if std::env::var_os("AWS_ENDPOINT_URL").is_none() {
        bail!("sortie dev runs against a local AWS: set AWS_ENDPOINT_URL (`make demo` starts moto and sets it)");
    }
    for name in &args.users {
        if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
            bail!("--user {name:?}: a user name must be non-empty, without spaces");
        }
    }
    let dir = args.data_dir.clone();
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating the data dir {}", dir.display()))?;
    // The port and tokens of the last run, and a token for each new user.
    let mut saved = data_dir::load(&dir)?.settle(&args.users, || sortie_core::tokens::random_hex(16));
    let config = aws_config::load_from_env().await;
    // Resources, created if missing: the queue and the bus here, the table and the bucket
    // through the composition's own store and artifacts once it is built.
    let sqs = aws_sdk_sqs::Client::new(&config);
    let queue_url = sqs
        .create_queue()
        .queue_name(&args.queue)
        .send()
        .await
        .context("creating the jobs queue")?
        .queue_url
        .unwrap_or_default();
    let eb = aws_sdk_eventbridge::Client::new(&config);
    if eb
        .describe_event_bus()
        .name(&args.bus)
        .send()
        .await
        .is_err()
    {
        eb.create_event_bus()
            .name(&args.bus)
            .send()
            .await
            .context("creating the bus")?;
    }

    // The API's address is the runners' callback URL, so bind first: on `--port`, else on
    // the data dir's last port (a free one, said loudly, if that one is taken).
    let listener = bind_api(args.port, saved.port).await?;
    let url = format!("http://{}", listener.local_addr()?);
    saved.port = Some(listener.local_addr()?.port());
    let token = saved.token.clone().unwrap_or_default();

    // The same composition root as the functions, plus the `local` launcher.
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let runner_binary = match &args.runner {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("sortie-pilot"),
    };
    // Secret references are resolved as ECS would, with Secrets Manager / SSM on the local AWS.
    let local = LocalLauncher::new(runner_binary, dir.join("jobs"), events_tx)
        .with_secrets(Arc::new(AwsSecretValues::new(&config)));
    let resources = Resources {
        table: args.table.clone(),
        jobs_queue_url: queue_url.clone(),
        bus_name: args.bus.clone(),
        bucket: Some(args.bucket.clone()),
        api_url: url.clone(),
        admin_subjects: vec![],
        sweep: SweepSettings {
            dispatch_lease: chrono::Duration::seconds(args.dispatch_lease.max(1)),
            agent_silence: chrono::Duration::seconds(args.agent_silence.max(1)),
            agent_stop_grace: chrono::Duration::seconds(args.agent_silence.clamp(1, 60)),
            ..Default::default()
        },
    };
    let parts = compose(&config, resources, Some(local.clone()));
    // A fresh local AWS (moto restarted) and a snapshot: the world comes back from it.
    let dynamo = aws_sdk_dynamodb::Client::new(&config);
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    );
    let world = if snapshot::table_exists(&dynamo, &args.table).await {
        None
    } else {
        snapshot::read_world(&dir)?
    };
    parts
        .store
        .ensure_table()
        .await
        .context("creating the table")?;
    if let Some(artifacts) = &parts.artifacts {
        artifacts
            .ensure_bucket()
            .await
            .context("creating the bucket")?;
    }
    if let Some(world) = &world {
        if world.table != args.table {
            tracing::warn!(snapshot = %world.table, table = %args.table, "the snapshot was taken of another table; restoring it into this one");
        }
        let endpoint = std::env::var("AWS_ENDPOINT_URL").ok();
        let restored =
            snapshot::restore(&dynamo, &s3, &args.table, world, &dir, endpoint.as_deref())
                .await
                .context("restoring the data dir's snapshot")?;
        println!(
            "sortie dev: restored {} record(s) and {} object(s) from {}",
            restored.items,
            restored.objects,
            snapshot::snapshot_dir(&dir).display()
        );
    }
    let (engine, queue) = (parts.engine.clone(), parts.queue.clone());
    // Runners an earlier `sortie dev` started: known again, watched, and reported.
    let adopted = local.adopt_orphans().await;
    if adopted > 0 {
        println!("sortie dev: adopted {adopted} runner launch(es) from an earlier run");
    }
    if world.is_some() {
        // The queue's messages were not kept: every queued lock holder is sent again now
        // (the sweeper would, after its resend delay). Running jobs whose runner died are
        // ended by the sweeper's lost-task rules.
        resend_queued(parts.store.as_ref(), queue.as_ref()).await;
    }
    data_dir::save(&dir, &saved)?;

    // Something changed since the last snapshot: set after every write the process makes.
    let dirty = Arc::new(AtomicBool::new(true));

    // The API, behind the development token (and the named users' tokens).
    let expected = format!("Bearer {token}");
    let users: std::collections::BTreeMap<String, String> = saved
        .users
        .iter()
        .map(|(n, t)| (t.clone(), n.clone()))
        .collect();
    let user_tokens = saved.users.clone();
    let users = Arc::new(users);
    let api_dirty = dirty.clone();
    let app = parts
        .router(true)?
        .layer(axum::middleware::from_fn(
            move |req: Request, next: Next| {
                let dirty = api_dirty.clone();
                async move {
                    let writes = !matches!(
                        *req.method(),
                        axum::http::Method::GET | axum::http::Method::HEAD
                    );
                    let response = next.run(req).await;
                    if writes {
                        dirty.store(true, Ordering::SeqCst);
                    }
                    response
                }
            },
        ))
        .layer(axum::middleware::from_fn(
            move |req: Request, next: Next| {
                let (expected, users) = (expected.clone(), users.clone());
                async move { dev_token_gate(&expected, &users, req, next).await }
            },
        ));
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the API server stopped");
        }
    });

    // dispatch: SQS long-pollers feeding real SqsEvent batches, several at once as
    // Lambda's event source mapping polls with several (each batch is one invocation).
    for _ in 0..POLLERS {
        let (sqs, queue_url) = (sqs.clone(), queue_url.clone());
        let (poll_engine, poll_queue) = (engine.clone(), queue.clone());
        let dirty = dirty.clone();
        tokio::spawn(async move {
            loop {
                match poll_once(&sqs, &queue_url, &poll_engine, &poll_queue).await {
                    Ok(true) => dirty.store(true, Ordering::SeqCst),
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "polling the jobs queue failed");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        });
    }

    // task-events: local runners' exits as ECS-shaped events. EventBridge invokes
    // task-events for each event at once, so they are handled concurrently (at most
    // EVENTS_IN_FLIGHT), but one task's events in the order they happened.
    let (event_engine, event_local, event_dirty) = (engine.clone(), local.clone(), dirty.clone());
    tokio::spawn(async move {
        let in_flight = Arc::new(tokio::sync::Semaphore::new(EVENTS_IN_FLIGHT));
        let mut last: HashMap<String, tokio::task::JoinHandle<()>> = HashMap::new();
        while let Some(detail) = events_rx.recv().await {
            last.retain(|_, handle| !handle.is_finished());
            let arn = detail["taskArn"].as_str().unwrap_or_default().to_string();
            let before = last.remove(&arn);
            let (engine, local, in_flight, dirty) = (
                event_engine.clone(),
                event_local.clone(),
                in_flight.clone(),
                event_dirty.clone(),
            );
            let handle = tokio::spawn(async move {
                if let Some(before) = before {
                    let _ = before.await;
                }
                let Ok(_permit) = in_flight.acquire_owned().await else {
                    return;
                };
                local_task_event(&engine, &local, detail).await;
                dirty.store(true, Ordering::SeqCst);
            });
            last.insert(arn, handle);
        }
    });

    // sweeper: on a timer.
    let (sweep_engine, every) = (engine.clone(), Duration::from_secs(args.sweep_every.max(1)));
    let sweep_dirty = dirty.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let event: EventBridgeEvent<serde_json::Value> = match serde_json::from_value(json!({
                "version": "0", "id": "tick", "detail-type": "Scheduled Event", "source": "aws.events", "account": "000000000000",
                "time": chrono::Utc::now(), "region": "local", "resources": [], "detail": {}
            })) {
                Ok(e) => e,
                Err(_) => continue,
            };
            match sortie_lambda_adapters::sweep_tick(&sweep_engine, event).await {
                Ok(report) if report == sortie_lifecycle::SweepReport::default() => {}
                Ok(_) => sweep_dirty.store(true, Ordering::SeqCst),
                Err(e) => tracing::warn!(error = %e, "sweep failed"),
            }
        }
    });

    // snapshots: the table and the buckets into the data dir, after a change.
    let snapshotter = Arc::new(tokio::sync::Mutex::new(snapshot::Snapshotter::new(
        std::env::var("AWS_ENDPOINT_URL").ok(),
        dynamo,
        s3,
        args.table.clone(),
        vec![args.bucket.clone()],
        dir.clone(),
    )));
    let (snap, snap_dirty) = (snapshotter.clone(), dirty.clone());
    let snap_every = Duration::from_secs(args.snapshot_every.max(1));
    let periodic = args.snapshot_every > 0;
    tokio::spawn(async move {
        if !periodic {
            return;
        }
        let mut tick = tokio::time::interval(snap_every);
        loop {
            tick.tick().await;
            if !snap_dirty.swap(false, Ordering::SeqCst) {
                continue;
            }
            if let Err(e) = snap.lock().await.take().await {
                snap_dirty.store(true, Ordering::SeqCst);
                tracing::warn!(error = %format!("{e:#}"), "the snapshot failed; the next pass tries again");
            }
        }
    });

    let mut agent = None;
    if let Some(group) = &args.agent {
        let (pool, child) = start_agent(
            parts.store.as_ref(),
            group,
            &url,
            &args,
            saved.agent.as_ref(),
        )
        .await?;
        println!(
            "sortie dev: agent pool {} of group {group}, with one sortie-agent",
            pool.pool
        );
        saved.agent = Some(pool.clone());
        data_dir::save(&dir, &saved)?;
        agent = Some((pool.pool, child));
    }
    let env = data_dir::env_text(
        &url,
        &token,
        &user_tokens,
        agent.as_ref().map(|a| a.0.as_str()),
        &dir,
    );
    data_dir::write_private(&dir.join("env"), env.as_bytes())?;
    println!("sortie dev: API {url}");
    println!("sortie dev: token {token}");
    println!("sortie dev: {}", data_dir::export_line(&url, &token));
    for (name, user_token) in &user_tokens {
        println!("sortie dev: token for user {name}: {user_token}");
    }
    println!(
        "sortie dev: data in {} (again later: sortie dev status)",
        dir.display()
    );
    if let Some(path) = &args.ready_file {
        std::fs::write(
            path,
            json!({"url": url, "token": token, "users": user_tokens, "agent_pool": agent.as_ref().map(|a| &a.0)}).to_string(),
        )
        .context("writing the ready file")?;
    }

    // Until Ctrl-C or SIGTERM, watching the dev agent.
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let mut watch = tokio::time::interval(Duration::from_secs(1));
    let mut agent_reported = false;
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = watch.tick() => {
                if let (Some((_, child)), false) = (agent.as_mut(), agent_reported) {
                    if let Ok(Some(status)) = child.try_wait() {
                        let message = agent_exited_message(&status.to_string(), &dir.join("agent.log"));
                        eprintln!("sortie dev: {message}");
                        tracing::error!(%status, "{message}");
                        agent_reported = true;
                    }
                }
            }
        }
    }
    if let Some((_, mut child)) = agent {
        // The agent drains on SIGTERM: it hands back what it cannot finish.
        if let (Some(pid), false) = (child.id(), agent_reported) {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    }
    // The last snapshot, after the agent handed back its jobs.
    match snapshotter.lock().await.take().await {
        Ok(_) => println!(
            "sortie dev: snapshot in {}",
            snapshot::snapshot_dir(&dir).display()
        ),
        Err(e) => eprintln!("sortie dev: the last snapshot failed: {e:#}"),
    }
    println!("sortie dev: stopped");
    Ok(())
}

/// What `sortie dev` says, once, when its own agent exits.
fn agent_exited_message(status: &str, log: &Path) -> String {
    format!(
        "the dev agent exited ({status}); agent jobs will wait. See {}. Restart sortie dev to start a new one.",
        log.display()
    )
}

/// Binds the API on `port` when given, else on `last` (the data dir's), else on a free
/// port; a taken `last` port falls back to a free one, said loudly.
async fn bind_api(port: Option<u16>, last: Option<u16>) -> anyhow::Result<tokio::net::TcpListener> {
    if let Some(port) = port {
        return tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| format!("binding the API port {port}"));
    }
    if let Some(last) = last.filter(|p| *p != 0) {
        match tokio::net::TcpListener::bind(("127.0.0.1", last)).await {
            Ok(l) => return Ok(l),
            Err(e) => {
                eprintln!("sortie dev: the data dir's port {last} is taken ({e}); using a free one: the URL and its export line change");
            }
        }
    }
    tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .context("binding the API port")
}

/// Sends every queued lock holder's message again (at most 1,000).
async fn resend_queued(store: &dyn sortie_store::JobStore, queue: &dyn sortie_store::JobQueue) {
    let listed = match store
        .pending_sends(chrono::Utc::now() + chrono::Duration::seconds(1), 1000)
        .await
    {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "queued jobs could not be listed; the sweeper re-sends them");
            return;
        }
    };
    let mut sent = 0;
    for job in listed.records {
        match queue.send(&job.id, 0).await {
            Ok(()) => sent += 1,
            Err(e) => {
                tracing::warn!(job_id = %job.id, error = %e, "re-send failed; the sweeper re-sends it")
            }
        }
    }
    if sent > 0 {
        println!("sortie dev: sent {sent} queued job(s) again");
    }
}

/// `sortie dev status`: the data dir's `env` file, and whether its API answers.
async fn status(dir: &Path) -> anyhow::Result<()> {
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
async fn health(url: &str) -> bool {
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

/// Lets through health, the OpenAPI document and the runner routes (which carry job tokens);
/// everything else needs the development token (`expected` is `Bearer <token>`), the
/// scheme matched in any case. A refusal is 401 with `WWW-Authenticate: Bearer`, plus
/// `error="invalid_token"` when a bearer token was sent but is not the development one.
///
/// A named user's token (`users`: token → name) passes too, with claims for that user on
/// the request, so the API sees that user and not the development identity.
async fn dev_token_gate(
    expected: &str,
    users: &std::collections::BTreeMap<String, String>,
    mut req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    // The runner routes, from the route table: `/v1/jobs/{id}/<tail>`.
    let open = path == "/v1/health"
        || path == "/v1/openapi.json"
        || (path.starts_with("/v1/jobs/")
            && sortie_api::Route::ALL
                .iter()
                .filter(|r| r.uses_job_token())
                .filter_map(|r| r.spec().1.strip_prefix("/v1/jobs/{id}"))
                .any(|tail| path.ends_with(tail)))
        // The agents' routes: `/v1/agent-pools/{id}/claims`, `…/jobs/{job}/heartbeat|exit`.
        || (path.starts_with("/v1/agent-pools/")
            && (path.ends_with("/claims")
                || path.ends_with("/heartbeat")
                || path.ends_with("/exit")));
    let want = expected.strip_prefix("Bearer ").unwrap_or(expected);
    let sent = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .and_then(|v| {
            let (scheme, token) = v.split_once([' ', '\t']).unwrap_or((v, ""));
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| token.trim_start_matches([' ', '\t']))
        });
    if open || sent == Some(want) {
        return next.run(req).await;
    }
    if let Some(name) = sent.and_then(|t| users.get(t)).cloned() {
        let claims = std::collections::BTreeMap::from([
            ("iss".to_string(), json!(DEV_USER_ISSUER)),
            ("sub".to_string(), json!(name)),
        ]);
        req.extensions_mut()
            .insert(sortie_api::VerifiedClaims(claims));
        return next.run(req).await;
    }
    let (code, challenge) = match sent {
        Some(_) => ("invalid_token", r#"Bearer error="invalid_token""#),
        None => ("unauthenticated", "Bearer"),
    };
    let body = json!({"error": {"code": code, "message": "sortie dev needs `Authorization: Bearer <token>`, as printed at start", "fields": []}});
    (
        axum::http::StatusCode::UNAUTHORIZED,
        [(axum::http::header::WWW_AUTHENTICATE, challenge)],
        axum::Json(body),
    )
        .into_response()
}

/// Handles one local runner event as the task-events function would, retrying a failure
/// a few times; a STOPPED event that was handled is acknowledged to the launcher.
async fn local_task_event(engine: &Engine, local: &LocalLauncher, detail: serde_json::Value) {
    let event = json!({
        "version": "0", "id": sortie_core::tokens::random_hex(8), "detail-type": "ECS Task State Change", "source": "aws.ecs",
        "account": "000000000000", "time": chrono::Utc::now(), "region": "local", "resources": [detail["taskArn"].clone()], "detail": detail,
    });
    let parsed: EventBridgeEvent<EcsTaskStateChange> = match serde_json::from_value(event) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(error = %e, "unreadable local task event");
            return;
        }
    };
    for attempt in 1..=5 {
        match sortie_lambda_adapters::task_state_change(engine, parsed.clone()).await {
            Ok(_) => {
                if parsed.detail.last_status == "STOPPED" {
                    local.acknowledge(&parsed.detail.task_arn).await;
                }
                return;
            }
            Err(e) => {
                tracing::warn!(attempt, error = %e, "task event failed; retrying");
                tokio::time::sleep(Duration::from_secs(attempt)).await;
            }
        }
    }
}

/// One long poll of the jobs queue, handed to dispatch; whether it had messages.
async fn poll_once(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    engine: &Engine,
    queue: &SqsJobQueue,
) -> anyhow::Result<bool> {
    let got = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .message_system_attribute_names(
            aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
        )
        .send()
        .await?;
    let messages = got.messages.unwrap_or_default();
    if messages.is_empty() {
        return Ok(false);
    }
    let records: Vec<SqsMessage> = messages
        .iter()
        .map(|m| {
            let mut r = SqsMessage::default();
            r.message_id = m.message_id.clone();
            r.receipt_handle = m.receipt_handle.clone();
            r.body = m.body.clone();
            r.event_source = Some("aws:sqs".into());
            r.aws_region = Some("local".into());
            for (k, v) in m.attributes().into_iter().flatten() {
                r.attributes.insert(k.as_str().to_string(), v.clone());
            }
            r
        })
        .collect();
    let mut event = SqsEvent::default();
    event.records = records;
    let response = sortie_lambda_adapters::dispatch_batch(engine, queue, event).await;
    let failed: Vec<String> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    for m in messages {
        if !failed.contains(&m.message_id.clone().unwrap_or_default()) {
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(m.receipt_handle.unwrap_or_default())
                .send()
                .await?;
        }
    }
    Ok(true)
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dead_agent_message_names_the_status_the_log_and_what_to_do() {
        let m = agent_exited_message("exit status: 101", Path::new(".sortie-dev/agent.log"));
        assert_eq!(
            m,
            "the dev agent exited (exit status: 101); agent jobs will wait. See .sortie-dev/agent.log. Restart sortie dev to start a new one."
        );
    }
}
