//! Completion: a task's own state change becomes its job's outcome.

use super::*;

impl Engine {
    /// Handles one "ECS Task State Change" event that EventBridge delivered from account
    /// `from` (its envelope's `account`; `None` for a local event). An event naming a
    /// cluster in another account is refused and changes nothing
    /// ([`sortie_core::arn::same_account`]); any other is [`Engine::task_event`].
    pub async fn task_event_from(
        &self,
        from: Option<&str>,
        change: &EcsTaskStateChange,
    ) -> Result<EventEffect, LifecycleError> {
        if !sortie_core::arn::same_account(from, &change.cluster_arn) {
            warn!(account = from.unwrap_or_default(), cluster = %change.cluster_arn, "refused a task event whose cluster is in another account");
            return Ok(EventEffect::Ignored(
                "the event's account is not its cluster's",
            ));
        }
        self.task_event(change).await
    }

    /// Handles one "ECS Task State Change" event.
    pub async fn task_event(
        &self,
        change: &EcsTaskStateChange,
    ) -> Result<EventEffect, LifecycleError> {
        let Some(id) = change
            .started_by
            .as_deref()
            .and_then(job_id_of)
            .map(JobId::from)
        else {
            return Ok(EventEffect::Ignored("not a task Sortie started"));
        };
        let id = &id;
        let task = TaskRef::new(change.task_arn.clone());
        let span = tracing::info_span!("job", job_id = %id);
        // Every request below is the job's (moto's timing in `sortie dev`).
        let work = async {
            let record = match self.jobs.store.get_job(id).await {
                Ok(r) => r,
                Err(StoreError::NotFound { .. }) => {
                    return Ok(EventEffect::Ignored("unknown job"))
                }
                Err(e @ StoreError::Corrupt { .. }) => {
                    warn!(error = %e, "task event for an unreadable job; the sweeper fails it");
                    return Ok(EventEffect::Ignored("unreadable job"));
                }
                Err(e) => return Err(e.into()),
            };
            if let Some(RunnerConfiguration::EcsFargate(runner)) =
                record.job.runner_spec.as_ref().map(|s| &s.runner_configuration)
            {
                if let Err(why) = runner.owns_cluster(&change.cluster_arn) {
                    warn!(task = %task, cluster = %change.cluster_arn, %why, "refused a task event from outside the job's runner");
                    return Ok(EventEffect::Ignored("not from the job's runner"));
                }
            }
            if record.task.as_ref().is_some_and(|known| *known != task) {
                return Ok(EventEffect::Ignored(
                    "an event of an earlier task of this job",
                ));
            }
            match change.last_status.as_str() {
                "STOPPED" => {
                    let stop = change.task_stop(container_name(&record).as_deref());
                    self.task_stopped(record, stop, &task).await
                }
                "RUNNING" => match record.job.state {
                    JobState::Dispatching => {
                        match self
                            .adopt(id, &task, &format!("task {task} running"), true)
                            .await
                        {
                            Ok(_) => Ok(EventEffect::Moved(JobState::Running)),
                            Err(StoreError::StateConflict { .. }) => {
                                Ok(EventEffect::Ignored("already moved on"))
                            }
                            Err(e) => Err(e.into()),
                        }
                    }
                    JobState::Running if record.started_at.is_none() => {
                        self.mark_unless_moved_on(
                            id,
                            JobUpdate {
                                started_at: Some(Utc::now()),
                                ..Default::default()
                            },
                        )
                        .await?;
                        Ok(EventEffect::Ignored("start recorded"))
                    }
                    _ => Ok(EventEffect::Ignored("out of order or duplicate")),
                },
                _ => Ok(EventEffect::Ignored("intermediate status")),
            }
        }
        .instrument(span);
        sortie_store::on_behalf::for_job(id.as_str(), Box::pin(work)).await
    }

    /// Decides what a stopped task (seen by its event) means for its job, and carries it
    /// out: the job's end ([`JobService::end`], through [`Engine::carry_out`]) or a requeue.
    pub(super) async fn task_stopped(
        &self,
        record: JobRecord,
        stop: TaskStop,
        task: &TaskRef,
    ) -> Result<EventEffect, LifecycleError> {
        if record.job.state.is_terminal() {
            // A duplicate STOPPED: harmless, but make sure the lock was released.
            self.release_and_next(&record).await?;
            return Ok(EventEffect::Ignored("already finished"));
        }
        if record.job.state == JobState::Queued {
            return Ok(EventEffect::Ignored("already requeued"));
        }
        let step = oversee(
            &facts(&record),
            &Seen::Stopped(stop),
            Utc::now(),
            self.timing(),
        );
        Ok(match self.carry_out(&record, step, Some(task)).await? {
            Some(state) => EventEffect::Moved(state),
            None => EventEffect::Ignored("already moved on"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::World;

    #[tokio::test]
    async fn a_task_event_about_another_accounts_cluster_is_refused() {
        let w = World::new().await;
        let engine = w.engine();
        let change = EcsTaskStateChange {
            task_arn: "arn:aws:ecs:us-east-1:123456789012:task/runners/abc".into(),
            cluster_arn: "arn:aws:ecs:us-east-1:123456789012:cluster/runners".into(),
            last_status: "STOPPED".into(),
            started_by: Some("sortie/01jabcdefghjkmnpqrstvwxyz0".into()),
            ..Default::default()
        };
        assert_eq!(
            engine
                .task_event_from(Some("999999999999"), &change)
                .await
                .unwrap(),
            EventEffect::Ignored("the event's account is not its cluster's")
        );
        // The same event from its own account (or with no envelope) goes on to the job.
        for from in [Some("123456789012"), None] {
            assert_eq!(
                engine.task_event_from(from, &change).await.unwrap(),
                EventEffect::Ignored("unknown job")
            );
        }
    }
}
