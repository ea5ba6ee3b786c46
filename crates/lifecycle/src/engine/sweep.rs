//! The sweep: what an event or a crash lost, repaired on a schedule.

use super::*;

impl Engine {
    /// One bounded, idempotent sweep pass. It never stops at an error: a list that cannot be
    /// read, or a job whose repair fails, is logged and counted in `errors`, and the pass goes
    /// on; an unreadable job item is failed and its environment released (`unreadable`).
    pub async fn sweep(&self, now: DateTime<Utc>) -> Result<SweepReport, LifecycleError> {
        let mut report = SweepReport::default();
        match self
            .jobs
            .store
            .pending_sends(now - self.settings.resend_after, self.settings.batch)
            .await
        {
            Ok(listed) => {
                for u in &listed.unreadable {
                    self.fail_unreadable(u, now, &mut report).await;
                }
                for job in listed {
                    match self.jobs.queue.send(&job.id, 0).await {
                        Ok(()) => {
                            info!(job_id = %job.id, "re-sent a lost send");
                            report.resent += 1;
                        }
                        Err(e) => {
                            warn!(job_id = %job.id, error = %e, "re-send failed");
                            report.errors += 1;
                        }
                    }
                }
            }
            Err(e) => {
                warn!(error = %e, "pending sends could not be listed; next pass tries again");
                report.errors += 1;
            }
        }
        // Ended jobs whose environment may still be locked by them (a crash between the end
        // and the release): release it (and send the next job) if so, then settle.
        match self
            .jobs
            .store
            .ended_jobs(now - self.settings.resend_after, self.settings.batch)
            .await
        {
            Ok(listed) => {
                for u in &listed.unreadable {
                    self.fail_unreadable(u, now, &mut report).await;
                }
                for record in listed {
                    let span = tracing::info_span!("job", job_id = %record.job.id);
                    let settled = async {
                        let held = match self
                            .jobs
                            .store
                            .get_environment(&record.job.environment)
                            .await
                        {
                            Ok(e) => e.item.active_job.as_ref() == Some(&record.job.id),
                            Err(StoreError::NotFound { .. }) => false,
                            Err(e) => return Err(LifecycleError::Store(e)),
                        };
                        if held {
                            self.release_and_next(&record).await?;
                            warn!("released an environment still locked by its ended job");
                            report.released += 1;
                        }
                        self.jobs
                            .store
                            .settle_ended_job(&record.job.id)
                            .await
                            .map_err(LifecycleError::Store)
                    }
                    .instrument(span)
                    .await;
                    if let Err(e) = settled {
                        warn!(job_id = %record.job.id, error = %e, "ended job not settled; next pass tries again");
                        report.errors += 1;
                    }
                }
            }
            Err(e) => {
                warn!(error = %e, "ended jobs could not be listed; next pass tries again");
                report.errors += 1;
            }
        }
        match self.jobs.store.active_jobs(self.settings.batch).await {
            Ok(listed) => {
                for u in &listed.unreadable {
                    self.fail_unreadable(u, now, &mut report).await;
                }
                for record in listed {
                    let span = tracing::info_span!("job", job_id = %record.job.id);
                    if let Err(e) = self
                        .sweep_one(record, now, &mut report)
                        .instrument(span)
                        .await
                    {
                        warn!(error = %e, "sweep of a job failed; next pass tries again");
                        report.errors += 1;
                    }
                }
            }
            Err(e) => {
                warn!(error = %e, "active jobs could not be listed; next pass tries again");
                report.errors += 1;
            }
        }
        Ok(report)
    }

    /// Fails a job whose item cannot be decoded, stops its task if it can still be found, and
    /// releases its environment, so that the environment is never held by a job that cannot
    /// progress. Errors are logged and counted; the pass goes on.
    async fn fail_unreadable(&self, u: &Unreadable, now: DateTime<Utc>, report: &mut SweepReport) {
        let span = tracing::info_span!("job", job_id = %u.job_id);
        async {
            let mut problem = u.message.clone();
            if problem.len() > 300 {
                let mut cut = 300;
                while !problem.is_char_boundary(cut) {
                    cut -= 1;
                }
                problem.truncate(cut);
                problem.push('…');
            }
            let reason = format!("sortie: the job's stored item is unreadable ({problem}); failed by the sweeper");
            warn!(key = %u.key, error = %u.message, "unreadable job item: failing it and releasing its environment");
            let record = match self.jobs.store.fail_unreadable_job(u, now, &reason).await {
                Ok(r) => r,
                Err(e) => {
                    warn!(error = %e, "could not fail the unreadable job; next pass tries again");
                    report.errors += 1;
                    return;
                }
            };
            // A launched job's task must not go on writing state once the lock is released.
            if let Some(task) = record.as_ref().and_then(|r| r.task.clone()) {
                let job = &record.as_ref().expect("just matched").job;
                if let Err(e) = self.launcher.stop(job, &task, &reason).await {
                    warn!(task = %task, error = %e, "could not stop the unreadable job's task");
                }
            }
            let env = record
                .as_ref()
                .map(|r| r.job.environment.clone())
                .or_else(|| u.environment.clone());
            match env {
                Some(env) => match self.jobs.release_env_and_next(&env, &u.job_id).await {
                    Ok(()) => report.unreadable += 1,
                    Err(e) => {
                        warn!(error = %e, "could not release the unreadable job's environment");
                        report.errors += 1;
                    }
                },
                None => {
                    warn!("the unreadable job names no readable environment; it was failed and left");
                    report.unreadable += 1;
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Decides, observes as the decision asks (a lookup by `startedBy`, a describe), and
    /// carries out the decision for one active job.
    async fn sweep_one(
        &self,
        record: JobRecord,
        now: DateTime<Utc>,
        report: &mut SweepReport,
    ) -> Result<(), LifecycleError> {
        let facts = facts(&record);
        let mut seen = Seen::Nothing;
        // At most one observation per job per pass: decide, observe, decide again.
        for _ in 0..2 {
            let step = decide(&facts, &seen, now, self.timing());
            match step {
                Step::Find => seen = Seen::Found(self.launcher.find(&record.job).await?),
                Step::Describe => {
                    let Some(task) = record.task.as_ref() else {
                        return Ok(());
                    };
                    seen = match self.launcher.describe(&record.job, task).await? {
                        TaskStatus::Running => Seen::Running,
                        TaskStatus::Stopped(stop) => Seen::Stopped(stop),
                        TaskStatus::Missing => Seen::Missing,
                    };
                }
                step => {
                    let counted = match &step {
                        Step::Adopt(_) => Some(&mut report.adopted),
                        Step::Requeue { .. } => Some(&mut report.requeued),
                        Step::Stop { timeout: true, .. }
                            if record.timeout_requested_at.is_none() =>
                        {
                            Some(&mut report.timed_out)
                        }
                        Step::End(_) => Some(&mut report.resolved),
                        _ => None,
                    };
                    let is_stop = matches!(step, Step::Stop { .. });
                    let task = match &seen {
                        Seen::Stopped(_) => record.task.clone(),
                        _ => None,
                    };
                    let moved = self.carry_out(&record, step, task.as_ref()).await?;
                    if let Some(n) = counted {
                        if moved.is_some() || is_stop {
                            *n += 1;
                        }
                    }
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}
