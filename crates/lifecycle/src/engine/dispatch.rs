//! Dispatch: one jobs-queue message claims a job and launches exactly one task (or offers
//! the job to its agent pool), or stops a launched job's task for a cancel.

use super::*;

impl Engine {
    /// Handles one jobs-queue message: launch the job, or stop it for a cancel.
    pub async fn dispatch(&self, body: &str, receive_count: u32) -> MessageDisposition {
        self.dispatch_at(body, receive_count, Utc::now()).await
    }

    /// [`Engine::dispatch`] at `now`: the claim, a refusal's requeue and its backoff are
    /// recorded at this time (tests drive a retried launch with a fake clock).
    pub async fn dispatch_at(
        &self,
        body: &str,
        receive_count: u32,
        now: DateTime<Utc>,
    ) -> MessageDisposition {
        let message: JobMessage = match serde_json::from_str(body) {
            Ok(m) => m,
            Err(e) => return MessageDisposition::Poison(format!("unparsable message: {e}")),
        };
        let span = tracing::info_span!("job", job_id = %message.job_id);
        let work = async {
            match &message.cancel_by {
                Some(by) => self.cancel_launched(&message.job_id, by).await,
                None => self.launch(&message.job_id, receive_count, now).await,
            }
        }
        .instrument(span);
        // Every request below is the job's (moto's timing in `sortie dev`).
        sortie_store::on_behalf::for_job(message.job_id.as_str(), Box::pin(work)).await
    }

    async fn launch(
        &self,
        id: &JobId,
        receive_count: u32,
        now: DateTime<Utc>,
    ) -> MessageDisposition {
        let retry = |reason: String| MessageDisposition::Retry {
            delay_seconds: redelivery_delay_seconds(receive_count),
            reason,
        };
        // Claim: the one conditional write that makes a duplicate delivery, or a racing
        // dispatcher, a no-op. It starts a new launch attempt and records the job token's
        // hash before anything is launched, so the runner's first call is always accepted.
        let token = new_token();
        let claimed = match self
            .jobs
            .store
            .transition_job(
                id,
                JobState::Queued,
                JobState::Dispatching,
                now,
                "claimed by dispatch",
                JobUpdate {
                    token_hash: Some(sortie_core::tokens::sha256_hex(token.as_bytes())),
                    next_attempt: true,
                    ..Default::default()
                },
            )
            .await
        {
            Ok(r) => r,
            Err(StoreError::StateConflict { actual, .. }) => {
                info!(state = %actual, "already claimed; duplicate delivery");
                if actual.is_terminal() {
                    return match self.ensure_released(id).await {
                        Ok(()) => MessageDisposition::Done,
                        Err(e) => retry(e.to_string()),
                    };
                }
                return MessageDisposition::Done;
            }
            Err(StoreError::NotFound { .. }) => {
                return MessageDisposition::Poison(format!("job {id} does not exist"))
            }
            // Its item cannot be read: the message can never succeed. The sweeper fails the
            // job and releases its environment.
            Err(e @ StoreError::Corrupt { .. }) => {
                return MessageDisposition::Poison(format!("job {id} is unreadable: {e}"))
            }
            Err(e) => return retry(e.to_string()),
        };
        // A pull request's job says it started, beside its launch (never before it): its
        // check goes from queued to in progress.
        let (disposition, ()) = tokio::join!(
            self.launch_claimed(&claimed, &token, receive_count, now),
            self.publish_dispatched(&claimed)
        );
        disposition
    }

    /// Publishes [`crate::bus::JOB_DISPATCHED`] for a pull request's job (best effort: the
    /// check shows the job's state at its end regardless). Other jobs publish nothing: the
    /// launch of every job pays no extra call.
    async fn publish_dispatched(&self, claimed: &JobRecord) {
        if claimed.job.pull_request.is_none() {
            return;
        }
        let resource = format!("sortie:job/{}", claimed.job.id);
        let detail = crate::bus::ended_detail(claimed);
        if let Err(e) = self
            .jobs
            .bus
            .publish(crate::bus::JOB_DISPATCHED, &resource, detail)
            .await
        {
            warn!(error = %e, "publishing sortie.job.dispatched failed");
        }
    }

    /// Launches a job this dispatcher claimed (or offers it to its agent pool).
    async fn launch_claimed(
        &self,
        claimed: &JobRecord,
        token: &str,
        receive_count: u32,
        now: DateTime<Utc>,
    ) -> MessageDisposition {
        let id = &claimed.job.id;
        let retry = |reason: String| MessageDisposition::Retry {
            delay_seconds: redelivery_delay_seconds(receive_count),
            reason,
        };
        if let Some(agent) = agent_runner(&claimed.job) {
            return self
                .offer(claimed, &agent.pool.clone(), receive_count)
                .await;
        }
        let launched = self
            .launcher
            .launch(&LaunchSpec {
                job: &claimed.job,
                token,
                api_url: &self.api_url,
                attempt: claimed.attempt.max(1),
            })
            .await;
        let seen = match launched {
            Ok(task) => {
                self.record_launch(id, &task).await;
                return MessageDisposition::Done;
            }
            Err(LaunchError::Retryable(reason)) => {
                warn!(%reason, attempt = claimed.attempt, "launch refused; retryable");
                return self.after_refusal(claimed, true, &reason, now).await;
            }
            Err(LaunchError::Fatal(reason)) => {
                warn!(%reason, attempt = claimed.attempt, "launch refused for good");
                return self.after_refusal(claimed, false, &reason, now).await;
            }
            Err(LaunchError::Uncertain(reason)) => Seen::LaunchUncertain(reason),
        };
        warn!(
            ?seen,
            attempt = claimed.attempt,
            "launch did not start a task"
        );
        // An uncertain launch waits for the lookup by `startedBy` after the lease.
        let step = oversee(&facts(claimed), &seen, now, self.timing());
        match self.carry_out(claimed, step, None).await {
            Ok(_) => MessageDisposition::Done,
            Err(e) => retry(e.to_string()),
        }
    }

    /// Offers an `agent` runner's claimed job to its agent pool, where an agent claims it
    /// ([`JobService::claim`]). A pool that does not exist (any more) fails the job, saying so.
    async fn offer(
        &self,
        claimed: &JobRecord,
        pool: &str,
        receive_count: u32,
    ) -> MessageDisposition {
        let retry = |reason: String| MessageDisposition::Retry {
            delay_seconds: redelivery_delay_seconds(receive_count),
            reason,
        };
        let id = &claimed.job.id;
        match self.jobs.store.get_pool(pool).await {
            Ok(found) if &found.item.pool.group == claimed.job.runner_id.group() => {}
            Ok(_) | Err(StoreError::NotFound { .. }) => {
                let step = Oversight::End(sortie_core::Outcome {
                    state: JobState::Failed,
                    reason: format!(
                        "launch failed: \"agent pool {pool} does not exist in the runner's group\""
                    ),
                });
                return match self.carry_out(claimed, step, None).await {
                    Ok(_) => MessageDisposition::Done,
                    Err(e) => retry(e.to_string()),
                };
            }
            Err(e) => return retry(e.to_string()),
        }
        match self
            .jobs
            .store
            .mark_job(
                id,
                Utc::now(),
                JobUpdate {
                    offer_to: Some(pool.to_string()),
                    ..Default::default()
                },
            )
            .await
        {
            Ok(_) => {
                info!(%pool, attempt = claimed.attempt, "offered to the agent pool");
                MessageDisposition::Done
            }
            // Canceled or moved on meanwhile: nothing to offer.
            Err(StoreError::StateConflict { .. }) => MessageDisposition::Done,
            // Not offered: the sweeper finds it dispatching without a task after the lease and
            // requeues it (a new attempt, a new offer).
            Err(e) => {
                warn!(error = %e, "offer not recorded; the sweeper will requeue the job");
                MessageDisposition::Done
            }
        }
    }

    /// Records a launched task (`dispatching → running`), and stops it at once if a cancel
    /// arrived during the launch.
    async fn record_launch(&self, id: &JobId, task: &TaskRef) {
        match self
            .adopt(id, task, &format!("launched task {task}"), false)
            .await
        {
            Ok(running) => {
                info!(task = %task, attempt = running.attempt, "launched");
                if let Some(by) = &running.cancel_requested_by {
                    if let Err(e) = self
                        .launcher
                        .stop(&running.job, task, &format!("{CANCELED_BY}{by}"))
                        .await
                    {
                        warn!(error = %e, "cancel requested during launch; stop failed, the sweeper retries");
                    }
                }
            }
            // The task's own event was handled first and already adopted it (the sweeper
            // retries a stop a cancel asked for meanwhile).
            Err(StoreError::StateConflict {
                actual: JobState::Running,
                ..
            }) => {
                info!(task = %task, "launched; its task's event recorded it first")
            }
            // The task runs but is not recorded: the sweeper adopts it by startedBy.
            // Never launch again: a retry of this message finds the job dispatching.
            Err(e) => {
                warn!(task = %task, error = %e, "launched but not recorded; the sweeper will adopt the task")
            }
        }
    }

    /// Stops a launched job's task for a cancel; `task-events` then finishes it as `canceled`.
    async fn cancel_launched(&self, id: &JobId, by: &str) -> MessageDisposition {
        let marked = match self
            .jobs
            .store
            .mark_job(
                id,
                Utc::now(),
                JobUpdate {
                    cancel_requested_by: Some(by.to_string()),
                    ..Default::default()
                },
            )
            .await
        {
            Ok(r) => r,
            Err(StoreError::StateConflict { .. }) => return MessageDisposition::Done,
            Err(StoreError::NotFound { .. }) => {
                return MessageDisposition::Poison(format!("job {id} does not exist"))
            }
            Err(e @ StoreError::Corrupt { .. }) => {
                return MessageDisposition::Poison(format!("job {id} is unreadable: {e}"))
            }
            Err(e) => {
                return MessageDisposition::Retry {
                    delay_seconds: 2,
                    reason: e.to_string(),
                }
            }
        };
        let Some(task) = &marked.task else {
            // Offered to an agent pool and not claimed: it ends now (a claim racing this
            // finds the cancel and refuses, or wins and its heartbeat delivers the cancel).
            if marked.offered_to.is_some() {
                let step = oversee(&facts(&marked), &Seen::Nothing, Utc::now(), self.timing());
                return match self.carry_out(&marked, step, None).await {
                    Ok(_) => MessageDisposition::Done,
                    Err(e) => MessageDisposition::Retry {
                        delay_seconds: 2,
                        reason: e.to_string(),
                    },
                };
            }
            // Still launching: the dispatcher stops the task once it records it.
            return MessageDisposition::Done;
        };
        match self
            .stop_task(&marked, task, &format!("{CANCELED_BY}{by}"))
            .await
        {
            Ok(()) => MessageDisposition::Done,
            Err(LaunchError::Fatal(reason)) => {
                warn!(%reason, "stop for cancel refused for good");
                let step = oversee(
                    &facts(&marked),
                    &Seen::StopRefused(reason),
                    Utc::now(),
                    self.timing(),
                );
                match self.carry_out(&marked, step, None).await {
                    Ok(_) => MessageDisposition::Done,
                    Err(e) => MessageDisposition::Retry {
                        delay_seconds: 2,
                        reason: e.to_string(),
                    },
                }
            }
            // Until the task is seen stopped, every sweep stops it again.
            Err(e) => MessageDisposition::Retry {
                delay_seconds: 2,
                reason: e.to_string(),
            },
        }
    }
}
