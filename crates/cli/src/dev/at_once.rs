//! Dispatch at once: `sortie dev` hands each launch message it sends to the jobs queue to
//! its own dispatcher at the same moment, so a job is claimed without waiting for SQS's
//! round trip (the send, then the long poll's answer).
//!
//! The message is still sent, tagged ([`DISPATCHED_HERE_ATTRIBUTE`]): SQS stays the
//! durable path. When the poller receives a tagged copy it settles it by the hand-over's
//! outcome ([`Handed::settle`]): handled, the copy is deleted unclaimed; a retry delays
//! the copy as dispatch's own retry would; otherwise (unknown tag, a poison message, a
//! restart) the copy is dispatched as any message is. Either way the claim's condition
//! keeps the launch exactly-once. A hand-over takes one of a few slots and is skipped
//! when none is free, so under load the jobs queue (a fair queue) orders the launches, and
//! one tenant's burst cannot hold back another's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use sortie_lifecycle::{Engine, MessageDisposition};
use sortie_store::{JobMessage, JobQueue, SqsJobQueue, StoreError, DISPATCHED_HERE_ATTRIBUTE};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

/// Hand-overs dispatching at once; a send that finds none free is not handed over.
pub(super) const SLOTS: usize = 16;

/// How long a hand-over waits for its SQS copy to be received (it is received within
/// milliseconds; this bounds what a lost copy keeps).
const KEEP: Duration = Duration::from_secs(600);

/// At most this many hand-overs wait for their copy; past it, sends are not handed over.
const MAX_WAITING: usize = 10_000;

/// How long the poller waits for a hand-over still under way before it settles its copy
/// (a launch is seconds at most; past this the copy is dispatched as any message is).
const SETTLE_WAIT: Duration = Duration::from_secs(60);

/// A send that can tag its message as dispatched here.
#[async_trait]
pub(super) trait TaggedSend: Send + Sync {
    /// Sends `message` after `delay_seconds`, tagged with `tag` when given.
    async fn send_tagged(
        &self,
        message: &JobMessage,
        delay_seconds: i32,
        tag: Option<&str>,
    ) -> Result<(), StoreError>;
}

#[async_trait]
impl TaggedSend for SqsJobQueue {
    async fn send_tagged(
        &self,
        message: &JobMessage,
        delay_seconds: i32,
        tag: Option<&str>,
    ) -> Result<(), StoreError> {
        SqsJobQueue::send_tagged(self, message, delay_seconds, tag).await
    }
}

/// One launch message handed to the dispatcher in process.
pub(super) struct HandOver {
    /// The message, as sent.
    pub(super) message: JobMessage,
    /// Where the dispatch's outcome goes.
    outcome: watch::Sender<Option<MessageDisposition>>,
    /// The slot it holds until its dispatch ends.
    _slot: OwnedSemaphorePermit,
}

/// Where a hand-over's outcome is seen: `None` while its dispatch runs.
type Outcome = watch::Receiver<Option<MessageDisposition>>;

/// Tag → when it was handed over, and its outcome.
type Waiting = HashMap<String, (Instant, Outcome)>;

/// The hand-overs whose SQS copy has not been received yet, by tag.
#[derive(Default)]
pub(super) struct Handed {
    waiting: Mutex<Waiting>,
}

/// What the poller does with a received copy of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Settled {
    /// Its hand-over handled it: delete it unclaimed.
    Handled,
    /// Its hand-over asked for a retry: deliver it again after this many seconds.
    Retry(i32),
    /// Dispatch it as any message.
    Dispatch,
}

impl Handed {
    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a hand-over under `tag`; false (nothing recorded) when too many wait.
    fn record(&self, tag: &str, outcome: Outcome) -> bool {
        let mut waiting = self.lock();
        let now = Instant::now();
        waiting.retain(|_, (at, _)| now.duration_since(*at) < KEEP);
        if waiting.len() >= MAX_WAITING {
            return false;
        }
        waiting.insert(tag.to_string(), (now, outcome));
        true
    }

    /// Forgets `tag` (its copy was never sent).
    fn forget(&self, tag: &str) {
        self.lock().remove(tag);
    }

    /// How many hand-overs wait for their copy.
    #[cfg(test)]
    pub(super) fn waiting(&self) -> usize {
        self.lock().len()
    }

    /// What to do with a received copy tagged `tag` (none: an untagged message): its
    /// hand-over's outcome, waited for when still under way (at most [`SETTLE_WAIT`]).
    pub(super) async fn settle(&self, tag: Option<&str>) -> Settled {
        let Some(mut outcome) = tag.and_then(|t| self.lock().remove(t).map(|(_, o)| o)) else {
            return Settled::Dispatch;
        };
        let seen = tokio::time::timeout(SETTLE_WAIT, outcome.wait_for(Option::is_some)).await;
        let disposition = match seen {
            Ok(Ok(d)) => d.clone(),
            // Dropped unanswered, or still under way: dispatch the copy.
            _ => None,
        };
        match disposition {
            Some(MessageDisposition::Done) => Settled::Handled,
            Some(MessageDisposition::Retry { delay_seconds, .. }) => Settled::Retry(delay_seconds),
            Some(MessageDisposition::Poison(_)) | None => Settled::Dispatch,
        }
    }
}

/// The jobs queue of `sortie dev`: every send goes to SQS; a launch message sent for now
/// is also handed to the dispatcher in process when a slot is free.
pub(super) struct AtOnceQueue {
    inner: Arc<dyn TaggedSend>,
    slots: Arc<Semaphore>,
    handed: Arc<Handed>,
    hand: mpsc::UnboundedSender<HandOver>,
}

impl AtOnceQueue {
    /// Over `inner`, with `slots` hand-overs at most at once, handing over on `hand`.
    pub(super) fn new(
        inner: Arc<dyn TaggedSend>,
        slots: usize,
        handed: Arc<Handed>,
        hand: mpsc::UnboundedSender<HandOver>,
    ) -> Self {
        Self {
            inner,
            slots: Arc::new(Semaphore::new(slots)),
            handed,
            hand,
        }
    }
}

#[async_trait]
impl JobQueue for AtOnceQueue {
    async fn send_message(
        &self,
        message: &JobMessage,
        delay_seconds: i32,
    ) -> Result<(), StoreError> {
        // A delayed send (a launch's backoff) and a cancel go the queue's way only.
        let slot = match (delay_seconds, &message.cancel_by) {
            (0, None) => self.slots.clone().try_acquire_owned().ok(),
            _ => None,
        };
        let Some(slot) = slot else {
            return self.inner.send_tagged(message, delay_seconds, None).await;
        };
        let tag = sortie_core::tokens::random_hex(16);
        let (outcome, seen) = watch::channel(None);
        if !self.handed.record(&tag, seen) {
            return self.inner.send_tagged(message, delay_seconds, None).await;
        }
        let handed = self.hand.send(HandOver {
            message: message.clone(),
            outcome,
            _slot: slot,
        });
        let tag = match handed {
            Ok(()) => Some(tag),
            Err(_) => {
                self.handed.forget(&tag);
                None
            }
        };
        let sent = self
            .inner
            .send_tagged(message, delay_seconds, tag.as_deref())
            .await;
        if let (Err(_), Some(tag)) = (&sent, &tag) {
            // No copy will come: the sweeper sends the job again, untagged.
            self.handed.forget(tag);
        }
        sent
    }
}

/// Dispatches each hand-over as its message's first delivery (twice at once under
/// `deliver_twice`, as SQS may deliver a message), and publishes the outcome for its copy.
pub(super) async fn dispatch_handed(
    engine: Arc<Engine>,
    mut handed: mpsc::UnboundedReceiver<HandOver>,
    deliver_twice: bool,
    dirty: Arc<AtomicBool>,
) {
    while let Some(hand_over) = handed.recv().await {
        let (engine, dirty) = (engine.clone(), dirty.clone());
        tokio::spawn(async move {
            let outcome = dispatch_one(&engine, &hand_over.message, deliver_twice).await;
            let _ = hand_over.outcome.send(Some(outcome));
            dirty.store(true, Ordering::SeqCst);
        });
    }
}

/// One hand-over's dispatch: Done only when every delivery is.
pub(super) async fn dispatch_one(
    engine: &Engine,
    message: &JobMessage,
    deliver_twice: bool,
) -> MessageDisposition {
    let body = serde_json::to_string(message).expect("serialisable");
    if !deliver_twice {
        return engine.dispatch(&body, 1).await;
    }
    let (a, b) = tokio::join!(engine.dispatch(&body, 1), engine.dispatch(&body, 1));
    match (a, b) {
        (MessageDisposition::Done, other) | (other, MessageDisposition::Done) => other,
        (first, _) => first,
    }
}

/// A received message's tag, when `sortie dev` dispatched it here too.
pub(super) fn tag_of(message: &aws_sdk_sqs::types::Message) -> Option<&str> {
    message
        .message_attributes()
        .and_then(|a| a.get(DISPATCHED_HERE_ATTRIBUTE))
        .and_then(|v| v.string_value())
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::atomic::AtomicUsize;

    use sortie_core::sensitive::SensitiveValues;
    use sortie_core::{
        EnvPath, Environment, Job, JobRequest, JobState, Runner, RunnerId, RunnerLink, RunnerSpec,
        TaskRef,
    };
    use sortie_launch::{LaunchError, LaunchSpec, Launcher, TaskStatus};
    use sortie_lifecycle::{Bus, JobOrder, JobService, LifecycleError, SweepSettings};
    use sortie_store::{EnvironmentStore, JobRecord, JobStore, MemoryStore, RunnerStore};

    use super::*;

    /// Records every send: (job id, delay, tag); fails every send when `fail` is set.
    #[derive(Default)]
    struct Sent {
        sends: Mutex<Vec<(String, i32, Option<String>)>>,
        fail: AtomicBool,
    }

    impl Sent {
        fn all(&self) -> Vec<(String, i32, Option<String>)> {
            self.sends.lock().unwrap().clone()
        }
    }

    #[async_trait]
    impl TaggedSend for Sent {
        async fn send_tagged(
            &self,
            message: &JobMessage,
            delay_seconds: i32,
            tag: Option<&str>,
        ) -> Result<(), StoreError> {
            if self.fail.load(Ordering::SeqCst) {
                return Err(StoreError::Aws {
                    service: "sqs",
                    message: "ServiceUnavailable".into(),
                    retryable: true,
                });
            }
            self.sends.lock().unwrap().push((
                message.job_id.to_string(),
                delay_seconds,
                tag.map(str::to_string),
            ));
            Ok(())
        }
    }

    fn queue(
        slots: usize,
    ) -> (
        AtOnceQueue,
        Arc<Sent>,
        Arc<Handed>,
        mpsc::UnboundedReceiver<HandOver>,
    ) {
        let (sent, handed) = (Arc::new(Sent::default()), Arc::new(Handed::default()));
        let (tx, rx) = mpsc::unbounded_channel();
        let queue = AtOnceQueue::new(sent.clone(), slots, handed.clone(), tx);
        (queue, sent, handed, rx)
    }

    fn message(id: &str) -> JobMessage {
        JobMessage {
            job_id: sortie_core::JobId::from(id.to_string()),
            cancel_by: None,
            tenant: "acme".into(),
        }
    }

    #[tokio::test]
    async fn a_launch_sent_now_is_handed_over_and_its_tagged_copy_settles_by_the_outcome() {
        let (queue, sent, handed, mut rx) = queue(2);
        queue.send_message(&message("job-a"), 0).await.unwrap();
        let hand_over = rx.try_recv().expect("handed over at once");
        assert_eq!(hand_over.message.job_id.as_str(), "job-a");
        let sends = sent.all();
        let tag = sends[0].2.clone().expect("the copy is tagged");
        assert_eq!((sends[0].0.as_str(), sends[0].1), ("job-a", 0));
        assert_eq!(handed.waiting(), 1);

        hand_over
            .outcome
            .send(Some(MessageDisposition::Done))
            .unwrap();
        assert_eq!(handed.settle(Some(&tag)).await, Settled::Handled);
        assert_eq!(handed.waiting(), 0, "a settled copy is forgotten");
        // A second copy of the same message (SQS delivers at least once) is dispatched.
        assert_eq!(handed.settle(Some(&tag)).await, Settled::Dispatch);
        assert_eq!(handed.settle(None).await, Settled::Dispatch);
        assert_eq!(handed.settle(Some("unknown")).await, Settled::Dispatch);
    }

    #[tokio::test]
    async fn a_copy_received_while_its_hand_over_runs_waits_for_its_outcome() {
        let (queue, sent, handed, mut rx) = queue(1);
        queue.send_message(&message("job-a"), 0).await.unwrap();
        let hand_over = rx.try_recv().unwrap();
        let tag = sent.all()[0].2.clone().unwrap();
        let settling = tokio::spawn({
            let handed = handed.clone();
            async move { handed.settle(Some(&tag)).await }
        });
        tokio::task::yield_now().await;
        assert!(!settling.is_finished(), "it waits for the hand-over");
        hand_over
            .outcome
            .send(Some(MessageDisposition::Retry {
                delay_seconds: 7,
                reason: "ThrottlingException".into(),
            }))
            .unwrap();
        assert_eq!(settling.await.unwrap(), Settled::Retry(7));
        drop(hand_over);

        // A hand-over that ends unanswered (its task died), or a poison message: the copy
        // is dispatched as any message is.
        for outcome in [None, Some(MessageDisposition::Poison("unparsable".into()))] {
            queue.send_message(&message("job-b"), 0).await.unwrap();
            let hand_over = rx.try_recv().unwrap();
            let tag = sent.all().last().unwrap().2.clone().unwrap();
            match outcome {
                Some(o) => hand_over.outcome.send(Some(o)).unwrap(),
                None => drop(hand_over),
            }
            assert_eq!(handed.settle(Some(&tag)).await, Settled::Dispatch);
        }
    }

    #[tokio::test]
    async fn a_delay_a_cancel_or_no_free_slot_leaves_the_launch_to_the_queue() {
        let (queue, sent, handed, mut rx) = queue(2);
        queue.send_message(&message("later"), 30).await.unwrap();
        let mut cancel = message("cancel");
        cancel.cancel_by = Some("alice".into());
        queue.send_message(&cancel, 0).await.unwrap();
        assert!(rx.try_recv().is_err(), "neither is handed over");
        // Two slots: the third launch at once waits for the queue, a fair queue.
        for id in ["a", "b", "c"] {
            queue.send_message(&message(id), 0).await.unwrap();
        }
        let (first, _second) = (rx.try_recv().unwrap(), rx.try_recv().unwrap());
        assert!(rx.try_recv().is_err());
        let tags: Vec<_> = sent
            .all()
            .into_iter()
            .map(|(id, _, t)| (id, t.is_some()))
            .collect();
        assert_eq!(
            tags,
            [
                ("later".into(), false),
                ("cancel".into(), false),
                ("a".into(), true),
                ("b".into(), true),
                ("c".into(), false)
            ]
        );
        assert_eq!(handed.waiting(), 2);
        // A hand-over's slot is free again once it ends.
        drop(first);
        queue.send_message(&message("d"), 0).await.unwrap();
        assert_eq!(rx.try_recv().unwrap().message.job_id.as_str(), "d");
    }

    #[tokio::test]
    async fn a_copy_never_sent_is_not_waited_for() {
        let (queue, sent, handed, mut rx) = queue(2);
        sent.fail.store(true, Ordering::SeqCst);
        assert!(queue.send_message(&message("a"), 0).await.is_err());
        assert!(rx.try_recv().is_ok(), "handed over before the send failed");
        assert_eq!(handed.waiting(), 0, "no copy will come");
    }

    // ---- with the engine: exactly-once, and a refused launch keeps its backoff ----

    /// Launches every job but refuses the first `refuse` launches as throttled.
    #[derive(Default)]
    struct Launches {
        launched: Mutex<Vec<String>>,
        refuse: AtomicUsize,
    }

    #[async_trait]
    impl Launcher for Launches {
        async fn launch(&self, spec: &LaunchSpec<'_>) -> Result<TaskRef, LaunchError> {
            if self
                .refuse
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err(LaunchError::Retryable(
                    "ThrottlingException: Rate exceeded".into(),
                ));
            }
            let mut launched = self.launched.lock().unwrap();
            launched.push(spec.job.id.to_string());
            Ok(TaskRef::new(format!(
                "arn:aws:ecs:us-east-1:123456789012:task/c/{}-{}",
                spec.job.id,
                launched.len()
            )))
        }
        async fn stop(&self, _: &Job, _: &TaskRef, _: &str) -> Result<(), LaunchError> {
            Ok(())
        }
        async fn describe(&self, _: &Job, _: &TaskRef) -> Result<TaskStatus, LaunchError> {
            Ok(TaskStatus::Running)
        }
        async fn find(&self, _: &Job) -> Result<Option<TaskRef>, LaunchError> {
            Ok(None)
        }
    }

    struct NoBus;

    #[async_trait]
    impl Bus for NoBus {
        async fn job_ended(&self, _: &JobRecord) -> Result<(), LifecycleError> {
            Ok(())
        }
    }

    struct Plane {
        engine: Arc<Engine>,
        store: Arc<MemoryStore>,
        sent: Arc<Sent>,
        handed: Arc<Handed>,
        launches: Arc<Launches>,
        rx: mpsc::UnboundedReceiver<HandOver>,
        env: Environment,
    }

    async fn plane(refuse: usize) -> Plane {
        let store = Arc::new(MemoryStore::new());
        let runner = RunnerId::parse("acme/fargate").unwrap();
        let spec = RunnerSpec::parse(
            "runner_configuration:
  type: ecs-fargate
  role_arn: arn:aws:iam::123456789012:role/sortie-launcher
  external_id: sortie-ext-7f3a
  region: us-east-1
  cluster: runners
  task_definition: arn:aws:ecs:us-east-1:123456789012:task-definition/sortie-runner:1
  container_name: runner
  subnets: [subnet-0123456789abcdef0]
  security_groups: [sg-0123456789abcdef0]
state_storage_configuration:
  type: s3
  bucket: acme-state
  region: us-east-1
",
        )
        .unwrap();
        store
            .create_runner(&Runner {
                id: runner.clone(),
                spec,
            })
            .await
            .unwrap();
        let env = Environment {
            settings: Default::default(),
            path: EnvPath::parse("acme/web/dev").unwrap(),
            env_type: "development".into(),
            labels: BTreeMap::new(),
            tags: BTreeSet::new(),
            runner: RunnerLink {
                runner_id: runner,
                rule_id: "default".into(),
                linked_by: "admin".into(),
                linked_at: chrono::Utc::now(),
            },
        };
        store.create_environment(&env).await.unwrap();
        let (sent, handed) = (Arc::new(Sent::default()), Arc::new(Handed::default()));
        let (tx, rx) = mpsc::unbounded_channel();
        let launches = Arc::new(Launches::default());
        launches.refuse.store(refuse, Ordering::SeqCst);
        let jobs = JobService {
            store: store.clone(),
            queue: Arc::new(AtOnceQueue::new(sent.clone(), SLOTS, handed.clone(), tx)),
            bus: Arc::new(NoBus),
            secrets: Arc::new(sortie_launch::MemoryJobSecrets::default()),
            gate: Default::default(),
        };
        let engine = Arc::new(Engine {
            jobs,
            launcher: launches.clone(),
            api_url: "https://api.sortie.example.com".into(),
            settings: SweepSettings::default(),
        });
        Plane {
            engine,
            store,
            sent,
            handed,
            launches,
            rx,
            env,
        }
    }

    impl Plane {
        /// Submits a plan; its hand-over is dispatched as `sortie dev` does, and settled.
        async fn submit_and_hand_over(&mut self) -> (sortie_core::JobId, String) {
            let request: JobRequest = serde_json::from_value(serde_json::json!({
                "operation": "plan",
                "source": {"type": "inline", "files": {"main.tf": ""}},
            }))
            .unwrap();
            let order = JobOrder::submit(request, SensitiveValues::default(), "alice", None);
            let submitted = self.engine.jobs.submit_for(&self.env, order).await.unwrap();
            let hand_over = self.rx.try_recv().expect("handed over");
            let outcome = dispatch_one(&self.engine, &hand_over.message, false).await;
            hand_over.outcome.send(Some(outcome)).unwrap();
            let tag = self.sent.all()[0].2.clone().expect("tagged");
            (submitted.job.id, tag)
        }

        fn launched(&self) -> Vec<String> {
            self.launches.launched.lock().unwrap().clone()
        }
    }

    #[tokio::test]
    async fn a_job_dispatched_at_once_launches_once_whatever_its_copy_does() {
        let mut p = plane(0).await;
        let (id, tag) = p.submit_and_hand_over().await;
        let job = p.store.get_job(&id).await.unwrap().job;
        assert_eq!(job.state, JobState::Running, "launched before any receive");
        assert_eq!(p.launched(), [id.to_string()]);
        assert_eq!(p.handed.settle(Some(&tag)).await, Settled::Handled);
        // Its copy dispatched all the same (a restart forgot the hand-over): the claim's
        // condition makes it a duplicate delivery.
        let body = serde_json::to_string(&message(id.as_str())).unwrap();
        assert_eq!(p.engine.dispatch(&body, 1).await, MessageDisposition::Done);
        assert_eq!(p.launched(), [id.to_string()], "launched exactly once");
    }

    #[tokio::test]
    async fn a_refused_launch_keeps_its_backoff_because_its_copy_is_settled_not_claimed() {
        let mut p = plane(1).await;
        let (id, tag) = p.submit_and_hand_over().await;
        let record = p.store.get_job(&id).await.unwrap();
        assert_eq!(
            record.job.state,
            JobState::Queued,
            "requeued for its backoff"
        );
        let sends = p.sent.all();
        assert_eq!(sends.len(), 2);
        assert!(
            sends[1].1 > 0 && sends[1].2.is_none(),
            "the retry is sent delayed, untagged: {sends:?}"
        );
        // The copy of the first send is settled: not claimed, so no launch before the backoff.
        assert_eq!(p.handed.settle(Some(&tag)).await, Settled::Handled);
        assert!(p.launched().is_empty());
        // Dispatching every copy instead (what settling prevents) would launch at once.
        let body = serde_json::to_string(&message(id.as_str())).unwrap();
        p.engine.dispatch(&body, 1).await;
        assert_eq!(
            p.launched(),
            [id.to_string()],
            "the copy jumped the backoff"
        );
    }
}
