//! Carrying out a decided step ([`Oversight`]): adopt, stop, requeue or end a job.

use super::*;

impl Engine {
    /// The decision's clocks, from the sweep settings.
    pub(super) fn timing(&self) -> Timing {
        Timing {
            dispatch_lease: self.settings.dispatch_lease,
            silence: self.settings.silence,
        }
    }

    /// Carries out one decided step for `record`. `task` is the task a stop was seen for
    /// (adopted first when the job is still `dispatching`). Returns the state the job moved
    /// to, if it moved; a job that moved on meanwhile is left alone.
    pub(super) async fn carry_out(
        &self,
        record: &JobRecord,
        step: Oversight,
        task: Option<&TaskRef>,
    ) -> Result<Option<JobState>, LifecycleError> {
        self.carry_out_as(record, step, task, false).await
    }

    /// [`Engine::carry_out`]; `swept`: by the sweeper, whose try to end a job is counted on
    /// the job before it starts ([`JobService::end_counted_first`]), so a try that kills
    /// the pass still counts towards the bound.
    pub(super) async fn carry_out_as(
        &self,
        record: &JobRecord,
        step: Oversight,
        task: Option<&TaskRef>,
        swept: bool,
    ) -> Result<Option<JobState>, LifecycleError> {
        let id = &record.job.id;
        let mut from = record.job.state;
        match step {
            Oversight::Wait | Oversight::Find | Oversight::Describe => Ok(None),
            Oversight::Adopt(found) => match self
                .adopt(
                    id,
                    &found,
                    &format!("adopted orphan task {found}, found by startedBy"),
                    false,
                )
                .await
            {
                Ok(_) => {
                    info!(task = %found, "adopted an orphaned task");
                    Ok(Some(JobState::Running))
                }
                Err(StoreError::StateConflict { .. }) => Ok(None),
                Err(e) => Err(e.into()),
            },
            Oversight::Heard => {
                self.mark_unless_moved_on(id, JobUpdate::default()).await?;
                Ok(None)
            }
            Oversight::Stop { reason, timeout } => {
                let Some(task) = record.task.as_ref() else {
                    return Ok(None);
                };
                match self.stop_task(record, task, &reason).await {
                    Ok(()) => {
                        info!(task = %task, %reason, "asked the platform to stop the task");
                        if timeout && record.timeout_requested_at.is_none() {
                            // Recorded only once the platform took the stop: a refused stop
                            // is tried again on the next sweep.
                            self.mark_unless_moved_on(
                                id,
                                JobUpdate {
                                    timeout_requested_at: Some(Utc::now()),
                                    ..Default::default()
                                },
                            )
                            .await?;
                        }
                        Ok(None)
                    }
                    Err(LaunchError::Fatal(error)) => {
                        warn!(task = %task, %error, "stop refused for good");
                        let step = oversee(
                            &facts(record),
                            &Seen::StopRefused(error),
                            Utc::now(),
                            self.timing(),
                        );
                        Box::pin(self.carry_out_as(record, step, None, swept)).await
                    }
                    Err(e) => Err(e.into()),
                }
            }
            Oversight::Requeue { reason, spot } => {
                let update = JobUpdate {
                    clear_task: true,
                    spot_requeue: spot,
                    ..Default::default()
                };
                match self
                    .jobs
                    .store
                    .transition_job(id, from, JobState::Queued, Utc::now(), &reason, update)
                    .await
                {
                    Ok(_) => {}
                    Err(StoreError::StateConflict { .. }) => return Ok(None),
                    Err(e) => return Err(e.into()),
                }
                info!(%reason, spot, "requeued for a new launch attempt");
                // It keeps the environment's lock. A failed send is re-sent by the sweeper.
                if let Err(e) = self.jobs.queue.send(&record.job, 0).await {
                    warn!(error = %e, "requeue send failed; the sweeper will re-send");
                }
                Ok(Some(JobState::Queued))
            }
            Oversight::End(outcome) => {
                if from == JobState::Dispatching {
                    if let Some(task) = task {
                        // The task stopped before the dispatcher recorded it: record it first.
                        match self
                            .adopt(id, task, &format!("task {task} adopted on its stop"), false)
                            .await
                        {
                            Ok(_)
                            | Err(StoreError::StateConflict {
                                actual: JobState::Running,
                                ..
                            }) => from = JobState::Running,
                            Err(StoreError::StateConflict { .. }) => return Ok(None),
                            Err(e) => return Err(e.into()),
                        }
                    }
                }
                // The one end of a job (a reviewed job's plan phase awaits approval instead),
                // then the step after it: a drift check's drift is answered.
                let reason = outcome.reason.clone();
                let how = EndCause::Decided { from, outcome };
                let report = if swept {
                    self.jobs.end_counted_first(record, how).await?
                } else {
                    self.jobs.end(record, how).await?
                };
                let Some(ended) = report.ended().cloned() else {
                    return Ok(None);
                };
                info!(state = %ended.job.state, %reason, "job ended");
                self.jobs.remediate_drift(&ended).await;
                Ok(Some(ended.job.state))
            }
        }
    }

    /// Asks the platform to stop a job's task; for a job an agent holds, orders the stop on
    /// the job, and the agent's next heartbeat answer delivers it.
    pub(super) async fn stop_task(
        &self,
        record: &JobRecord,
        task: &TaskRef,
        reason: &str,
    ) -> Result<(), LaunchError> {
        if record.agent.is_none() {
            return self.launcher.stop(&record.job, task, reason).await;
        }
        let update = JobUpdate {
            agent_stop: Some(sortie_core::agent_pool::AgentStop {
                reason: reason.to_string(),
                at: Utc::now(),
            }),
            ..Default::default()
        };
        match self
            .jobs
            .store
            .mark_job(&record.job.id, Utc::now(), update)
            .await
        {
            Ok(_) | Err(StoreError::StateConflict { .. }) => Ok(()),
            Err(e) => Err(LaunchError::Retryable(e.to_string())),
        }
    }

    /// Records the task of a job still `dispatching` (`dispatching → running`): a task seen
    /// running, stopped, or found by `startedBy` before the dispatcher recorded it.
    pub(super) async fn adopt(
        &self,
        id: &JobId,
        task: &TaskRef,
        reason: &str,
        seen_running: bool,
    ) -> Result<JobRecord, StoreError> {
        let update = JobUpdate {
            task: Some(task.clone()),
            started_at: seen_running.then(Utc::now),
            ..Default::default()
        };
        self.jobs
            .store
            .transition_job(
                id,
                JobState::Dispatching,
                JobState::Running,
                Utc::now(),
                reason,
                update,
            )
            .await
    }

    /// Records `update` on a launched job; a job that moved on meanwhile is left alone.
    pub(super) async fn mark_unless_moved_on(
        &self,
        id: &JobId,
        update: JobUpdate,
    ) -> Result<(), StoreError> {
        match self.jobs.store.mark_job(id, Utc::now(), update).await {
            Ok(_) | Err(StoreError::StateConflict { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Releases the environment's lock if this (terminal) job still holds it, sending the next job.
    pub(super) async fn ensure_released(&self, id: &JobId) -> Result<(), LifecycleError> {
        let record = self.jobs.store.get_job(id).await?;
        self.release_and_next(&record).await
    }

    pub(super) async fn release_and_next(&self, record: &JobRecord) -> Result<(), LifecycleError> {
        Ok(self.jobs.release_and_next(record).await?)
    }
}
