//! `sortie dev`: the four handlers in one process, against a local AWS on loopback.
//!
//! - the API router on 127.0.0.1, behind a development token;
//! - an SQS long-poller feeding real `SqsEvent` batches to the dispatch handler;
//! - `local` runners' exits, as ECS "Task State Change" events, to the task-events handler;
//! - the sweeper on a timer;
//! - with a data dir (`--data-dir`, default `.sortie-dev`): its port, tokens and world kept
//!   across restarts ([`snapshot`], [`data_dir`]).

mod agent;
mod at_once;
mod data_dir;
mod dev_token;
mod events;
mod identity_key;
mod options;
mod pulls;
mod snapshot;
mod status;

pub use self::identity_key::DEV_IDENTITY_KEY;
pub use self::options::{DevArgs, DevCommand};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use axum::extract::Request;
use axum::middleware::Next;
use serde_json::json;
use sortie_launch::{AwsSecretValues, LocalLauncher};
use sortie_lifecycle::SweepSettings;
use sortie_wiring::{compose_with_pulls, Resources};
use tokio::sync::mpsc;

use self::agent::{agent_exited_message, start_agent};
use self::dev_token::require_dev_token;
use self::events::{
    handle_batch, local_task_event, receive, resend_queued, superseded_by, Chaos, PendingEvent,
    BATCHES_IN_FLIGHT, EVENTS_IN_FLIGHT, POLLERS,
};
use self::identity_key::ensure_identity_key;
use self::status::status;

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
    let mut saved =
        data_dir::load(&dir)?.settle(&args.users, || sortie_core::tokens::random_hex(16));
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

    ensure_identity_key(&config, &args.identity_key).await?;

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
    let chaos = Chaos::from_env();
    if chaos.any() {
        println!("sortie dev: chaos on: {chaos:?} (SORTIE_DEV_CHAOS_*)");
    }
    let local = LocalLauncher::new(runner_binary, dir.join("jobs"), events_tx)
        .with_secrets(Arc::new(AwsSecretValues::new(&config)))
        .with_throttle_percent(chaos.throttle_percent);
    let resources = Resources {
        table: args.table.clone(),
        jobs_queue_url: queue_url.clone(),
        bus_name: args.bus.clone(),
        bucket: Some(args.bucket.clone()),
        live_bucket: (!args.live_bucket.is_empty()).then(|| args.live_bucket.clone()),
        audit_bucket: Some(args.audit_bucket.clone()),
        api_url: url.clone(),
        admin_subjects: vec![],
        // Pull requests queue in memory here (below), not on SQS.
        pull_queue_url: None,
        sweep: SweepSettings {
            dispatch_lease: chrono::Duration::seconds(args.dispatch_lease.max(1)),
            agent_silence: chrono::Duration::seconds(args.agent_silence.max(1)),
            agent_stop_grace: chrono::Duration::seconds(args.agent_silence.clamp(1, 60)),
            audit_settle: chrono::Duration::seconds(i64::from(args.audit_settle)),
            audit_export_every: chrono::Duration::minutes(i64::from(args.audit_export_minutes)),
            ..Default::default()
        },
        // The console at `<url>/` signs in with the tokens printed below.
        console: sortie_api::ConsoleConfig::local(),
        identity: Some(sortie_wiring::IdentityKeys {
            signing: args.identity_key.clone(),
            standby: Some(format!("{}-standby", args.identity_key)),
            token_seconds: args.identity_token_seconds,
            keys_ttl: std::time::Duration::from_secs(args.identity_keys_ttl),
        }),
    };
    // Pull requests: webhook work and job ends queue in memory; one worker handles them.
    let pull_queue = Arc::new(sortie_store::MemoryPullQueue::default());
    let pull_parts = sortie_api::PullParts::new(
        Arc::new(sortie_lifecycle::pull_requests::AnyHosts::new(Arc::new(
            sortie_launch::AwsJobSecrets::new(&config),
        ))),
        pull_queue.clone(),
        url.clone(),
    );
    // Notifications: every event published is also handed to the worker below, which sends
    // deliveries through the guarded client (plain http and loopback allowed here).
    let (notify_tx, notify_rx) = mpsc::unbounded_channel();
    let notify_sender: Arc<dyn sortie_lifecycle::Sender> =
        Arc::new(sortie_http::deliver::GuardedClient::system_resolving(
            true,
            Arc::new(sortie_http::deliver::PinnedResolver {
                pins: args.resolve.clone(),
            }),
        ));
    // Dispatch at once: each launch sent is handed to the dispatcher below as well.
    let handed = Arc::new(at_once::Handed::default());
    let (hand_tx, hand_rx) = mpsc::unbounded_channel();
    let wrap_queue = (args.dispatch_at_once > 0).then(|| {
        let (slots, handed) = (args.dispatch_at_once, handed.clone());
        Box::new(move |sqs: Arc<sortie_store::SqsJobQueue>| {
            Arc::new(at_once::AtOnceQueue::new(sqs, slots, handed, hand_tx))
                as Arc<dyn sortie_store::JobQueue>
        }) as sortie_wiring::WrapQueue
    });
    let mut parts = compose_with_pulls(
        &config,
        resources,
        Some(local.clone()),
        Some(pull_parts),
        Some(notify_tx),
        wrap_queue,
    );
    parts.plane.notify = Some(sortie_api::NotifyParts {
        sender: notify_sender.clone(),
        local: true,
        console_url: url.clone(),
    });
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
    sortie_store::S3AuditArchive::new(s3.clone(), args.audit_bucket.clone())
        .ensure_bucket(1)
        .await
        .context("creating the audit bucket")?;
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
    if let Some(prs) = parts.pull_requests() {
        if args.reconcile_every > 0 {
            tokio::spawn(pulls::reconcile_every(
                prs.clone(),
                pull_queue.clone(),
                Duration::from_secs(args.reconcile_every),
            ));
        }
        tokio::spawn(pulls::work(prs, pull_queue.clone(), dirty.clone()));
    }

    tokio::spawn(
        sortie_lifecycle::notify_worker::Worker {
            notifications: parts.notifications(),
            sender: notify_sender,
            console_url: url.clone(),
            longest_wait: args.notify_retry_cap.map(Duration::from_secs),
        }
        .run(notify_rx),
    );

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
                async move { require_dev_token(&expected, &users, req, next).await }
            },
        ));
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the API server stopped");
        }
    });

    // dispatch: SQS long-pollers feeding real SqsEvent batches, several at once as
    // Lambda's event source mapping polls with several (each batch is one invocation). A
    // poller hands a batch on and receives again at once: a batch's launches never hold
    // up the next message (at most BATCHES_IN_FLIGHT batches at a time).
    tokio::spawn(at_once::dispatch_handed(
        engine.clone(),
        hand_rx,
        chaos.deliver_twice,
        dirty.clone(),
    ));
    let batches = Arc::new(tokio::sync::Semaphore::new(BATCHES_IN_FLIGHT));
    for _ in 0..POLLERS {
        let (sqs, queue_url) = (sqs.clone(), queue_url.clone());
        let (poll_engine, poll_queue) = (engine.clone(), queue.clone());
        let (dirty, batches, handed) = (dirty.clone(), batches.clone(), handed.clone());
        tokio::spawn(async move {
            loop {
                let Ok(slot) = batches.clone().acquire_owned().await else {
                    return;
                };
                let messages = match receive(&sqs, &queue_url).await {
                    Ok(m) if m.is_empty() => continue,
                    Ok(m) => m,
                    Err(e) => {
                        tracing::warn!(error = %e, "polling the jobs queue failed");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                };
                let (sqs, queue_url) = (sqs.clone(), queue_url.clone());
                let (engine, queue, dirty, handed) = (
                    poll_engine.clone(),
                    poll_queue.clone(),
                    dirty.clone(),
                    handed.clone(),
                );
                tokio::spawn(async move {
                    let _slot = slot;
                    let handled = handle_batch(
                        &sqs,
                        &queue_url,
                        &engine,
                        &queue,
                        &handed,
                        messages,
                        chaos.deliver_twice,
                    )
                    .await;
                    if let Err(e) = handled {
                        tracing::warn!(error = %e, "deleting handled jobs-queue messages failed; they are delivered again");
                    }
                    dirty.store(true, Ordering::SeqCst);
                });
            }
        });
    }

    // task-events: local runners' exits as ECS-shaped events. EventBridge invokes
    // task-events for each event at once, so they are handled concurrently (at most
    // EVENTS_IN_FLIGHT), one task's events in the order they happened, except a STOPPED:
    // an earlier event not handled yet is skipped ([`superseded_by`]).
    let (event_engine, event_local, event_dirty) = (engine.clone(), local.clone(), dirty.clone());
    tokio::spawn(async move {
        let in_flight = Arc::new(tokio::sync::Semaphore::new(EVENTS_IN_FLIGHT));
        let mut last: HashMap<String, PendingEvent> = HashMap::new();
        while let Some(detail) = events_rx.recv().await {
            last.retain(|_, pending| !pending.handle.is_finished());
            let arn = detail["taskArn"].as_str().unwrap_or_default().to_string();
            let status = detail["lastStatus"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            // A STOPPED does not wait for its task's earlier events (EventBridge keeps no
            // order either): one not started yet is skipped, one under way runs beside it.
            let before = last.remove(&arn).and_then(|before| {
                if superseded_by(&before.status, &status) {
                    before.skip.store(true, Ordering::SeqCst);
                    return None;
                }
                Some(before)
            });
            let skip = Arc::new(AtomicBool::new(false));
            let (engine, local, in_flight, dirty, skipped) = (
                event_engine.clone(),
                event_local.clone(),
                in_flight.clone(),
                event_dirty.clone(),
                skip.clone(),
            );
            let handle = tokio::spawn(async move {
                if let Some(before) = before {
                    let _ = before.handle.await;
                }
                let Ok(_permit) = in_flight.acquire_owned().await else {
                    return;
                };
                if skipped.load(Ordering::SeqCst) {
                    return;
                }
                local_task_event(&engine, &local, detail).await;
                dirty.store(true, Ordering::SeqCst);
            });
            last.insert(
                arn,
                PendingEvent {
                    handle,
                    status,
                    skip,
                },
            );
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
    println!("sortie dev: console {url}/");
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
        // Every token is in it: created 0600 (never readable by others, even briefly).
        data_dir::write_private(
            path,
            json!({"url": url, "console": format!("{url}/"), "token": token, "users": user_tokens, "agent_pool": agent.as_ref().map(|a| &a.0)}).to_string().as_bytes(),
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
