//! Contract cases for agent pools: create, list, update and delete with versions, the last
//! claim, and a job offered to the pool's agents, claimed once and heartbeated.

use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};
use sortie_core::{GroupPath, JobState};
use sortie_store::{JobUpdate, Store, StoreError};

use super::{job, setup_env, ENV};

const POOL: &str = "apool-01jnx6v4k2m8q9r3s5t7w0y1za";

pub async fn an_offered_job_is_claimed_once_by_one_agent_and_heartbeats_only_for_that_claim<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    use sortie_core::agent_pool::{agent_task, AgentHold, AgentStop};
    setup_env(&*s, ENV).await;
    let j = job(ENV);
    s.submit_job(&j, None).await.unwrap();
    let now = Utc::now();
    s.transition_job(
        &j.id,
        JobState::Queued,
        JobState::Dispatching,
        now,
        "claimed by dispatch",
        JobUpdate {
            next_attempt: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(
        s.offered_jobs(POOL, 10).await.unwrap().is_empty(),
        "not offered yet"
    );
    let offer = JobUpdate {
        offer_to: Some(POOL.into()),
        ..Default::default()
    };
    s.mark_job(&j.id, now, offer).await.unwrap();
    let offered = s.offered_jobs(POOL, 10).await.unwrap();
    assert_eq!(offered.len(), 1);
    assert_eq!(offered[0].offered_to.as_deref(), Some(POOL));
    assert!(
        s.offered_jobs("apool-other", 10).await.unwrap().is_empty(),
        "offers are per pool"
    );
    // Eight agents race for it: one claim wins.
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (s, id) = (s.clone(), j.id.clone());
            tokio::spawn(async move {
                let agent = format!("a{i}");
                let at = Utc::now();
                s.transition_job(
                    &id,
                    JobState::Dispatching,
                    JobState::Running,
                    at,
                    "claimed by an agent",
                    JobUpdate {
                        claim_from: Some(POOL.into()),
                        task: Some(agent_task(POOL, &agent, 1)),
                        agent: Some(AgentHold {
                            pool: POOL.into(),
                            agent: agent.clone(),
                            claimed_at: at,
                            heartbeat_at: at,
                            stop: None,
                        }),
                        ..Default::default()
                    },
                )
                .await
                .ok()
                .map(|_| agent)
            })
        })
        .collect();
    let mut winners = vec![];
    for t in tasks {
        winners.extend(t.await.unwrap());
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let winner = &winners[0];
    assert!(
        s.offered_jobs(POOL, 10).await.unwrap().is_empty(),
        "a claimed job is no longer offered"
    );
    let record = s.get_job(&j.id).await.unwrap();
    assert_eq!(record.offered_to, None);
    assert_eq!(
        record.agent.as_ref().map(|a| a.agent.as_str()),
        Some(winner.as_str())
    );
    // Heartbeats: the holder's move its clock; anyone else's is a conflict.
    let later = Utc::now() + Duration::seconds(5);
    let beat = s
        .heartbeat_job(&j.id, &agent_task(POOL, winner, 1), later)
        .await
        .unwrap();
    assert_eq!(beat.agent.unwrap().heartbeat_at, later);
    assert!(matches!(
        s.heartbeat_job(&j.id, &agent_task(POOL, "intruder", 1), later)
            .await,
        Err(StoreError::StateConflict { .. })
    ));
    assert!(
        matches!(
            s.heartbeat_job(&j.id, &agent_task(POOL, winner, 2), later)
                .await,
            Err(StoreError::StateConflict { .. })
        ),
        "an earlier or later attempt's claim does not hold the job"
    );
    // A stop order: the first wins.
    for reason in ["sortie: canceled by alice", "sortie: timed out after 60s"] {
        s.mark_job(
            &j.id,
            Utc::now(),
            JobUpdate {
                agent_stop: Some(AgentStop {
                    reason: reason.into(),
                    at: Utc::now(),
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    }
    let stop = s.get_job(&j.id).await.unwrap().agent.unwrap().stop.unwrap();
    assert_eq!(stop.reason, "sortie: canceled by alice");
    // A requeue forgets the agent; a claim of a job not offered to the pool is refused.
    s.transition_job(
        &j.id,
        JobState::Running,
        JobState::Queued,
        Utc::now(),
        "agent lost",
        JobUpdate {
            clear_task: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(s.get_job(&j.id).await.unwrap().agent, None);
    s.transition_job(
        &j.id,
        JobState::Queued,
        JobState::Dispatching,
        Utc::now(),
        "claimed by dispatch",
        JobUpdate::default(),
    )
    .await
    .unwrap();
    assert!(
        matches!(
            s.transition_job(
                &j.id,
                JobState::Dispatching,
                JobState::Running,
                Utc::now(),
                "claim",
                JobUpdate {
                    claim_from: Some(POOL.into()),
                    ..Default::default()
                }
            )
            .await,
            Err(StoreError::StateConflict { .. })
        ),
        "not offered: no claim"
    );
}

pub async fn agent_pools_are_created_listed_updated_with_versions_and_deleted<
    S: Store + 'static,
>(
    s: Arc<S>,
) {
    use sortie_core::agent_pool::AgentPool;
    use sortie_store::{AgentPoolRecord, PoolToken};
    let record = AgentPoolRecord {
        pool: AgentPool {
            id: POOL.into(),
            group: GroupPath::parse("acme/payments").unwrap(),
            name: "onprem".into(),
            description: String::new(),
            oidc: None,
        },
        tokens: vec![PoolToken {
            id: "tok-1".into(),
            hash: "ab".repeat(32),
            created_at: Utc::now(),
            created_by: "alice".into(),
        }],
        created_at: Utc::now(),
        created_by: "alice".into(),
        last_claim_at: None,
    };
    assert_eq!(s.create_pool(&record).await.unwrap().version, 1);
    assert!(matches!(
        s.create_pool(&record).await,
        Err(StoreError::AlreadyExists { .. })
    ));
    assert_eq!(s.get_pool(POOL).await.unwrap().item, record);
    let listed = s
        .list_pools(&GroupPath::parse("acme/payments").unwrap())
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert!(
        s.list_pools(&GroupPath::parse("acme").unwrap())
            .await
            .unwrap()
            .is_empty(),
        "exactly this group"
    );
    let mut rotated = record.clone();
    rotated.tokens.push(PoolToken {
        id: "tok-2".into(),
        hash: "cd".repeat(32),
        created_at: Utc::now(),
        created_by: "alice".into(),
    });
    assert_eq!(s.update_pool(&rotated, Some(1)).await.unwrap().version, 2);
    assert!(
        matches!(
            s.update_pool(&record, Some(1)).await,
            Err(StoreError::VersionMismatch { .. })
        ),
        "a stale rotation never loses a token"
    );
    assert_eq!(s.get_pool(POOL).await.unwrap().item.tokens.len(), 2);
    assert!(matches!(
        s.delete_pool(POOL, Some(1)).await,
        Err(StoreError::VersionMismatch { .. })
    ));
    s.delete_pool(POOL, Some(2)).await.unwrap();
    assert!(matches!(
        s.get_pool(POOL).await,
        Err(StoreError::NotFound { .. })
    ));
}

pub async fn a_pools_last_claim_only_moves_forward_and_keeps_the_version<S: Store + 'static>(
    s: Arc<S>,
) {
    use sortie_core::agent_pool::AgentPool;
    use sortie_store::AgentPoolRecord;
    let record = AgentPoolRecord {
        pool: AgentPool {
            id: POOL.into(),
            group: GroupPath::parse("acme/payments").unwrap(),
            name: "onprem".into(),
            description: String::new(),
            oidc: None,
        },
        tokens: vec![],
        created_at: Utc::now(),
        created_by: "alice".into(),
        last_claim_at: None,
    };
    s.create_pool(&record).await.unwrap();
    assert_eq!(s.get_pool(POOL).await.unwrap().item.last_claim_at, None);
    let t1 = Utc.with_ymd_and_hms(2026, 11, 25, 14, 2, 0).unwrap();
    s.record_pool_claim(POOL, t1).await.unwrap();
    let read = s.get_pool(POOL).await.unwrap();
    assert_eq!(read.item.last_claim_at, Some(t1));
    assert_eq!(read.version, 1, "a claim is not an edit: the ETag stays");
    // An older claim (a slow request) never moves it back.
    s.record_pool_claim(POOL, t1 - Duration::seconds(40))
        .await
        .unwrap();
    assert_eq!(s.get_pool(POOL).await.unwrap().item.last_claim_at, Some(t1));
    let t2 = t1 + Duration::seconds(31);
    s.record_pool_claim(POOL, t2).await.unwrap();
    assert_eq!(s.get_pool(POOL).await.unwrap().item.last_claim_at, Some(t2));
    // An edit made with the version read keeps working after claims.
    let mut edited = s.get_pool(POOL).await.unwrap().item;
    edited.pool.description = "on premises".into();
    assert_eq!(s.update_pool(&edited, Some(1)).await.unwrap().version, 2);
    assert!(matches!(
        s.record_pool_claim("apool-missing", t2).await,
        Err(StoreError::NotFound { .. })
    ));
}
