//! The sweep: what an event or a crash lost, repaired on a schedule.

use super::*;

impl Engine {
    /// One bounded, idempotent sweep pass. It never stops at an error: a list that cannot be
    /// read, or a job whose repair fails, is logged and counted in `errors`, and the pass goes
    /// on; an unreadable job item is failed and its environment released (`unreadable`).
    /// Every active job is looked at, within [`SweepSettings::active_budget`].
    pub async fn sweep(&self, now: DateTime<Utc>) -> Result<SweepReport, LifecycleError> {
        self.sweep_resuming(now, &SweepResume::default()).await
    }

    /// [`Engine::sweep`], starting the active jobs where the pass before stopped when it
    /// spent its budget, and recording in `resume` where this one stops.
    pub async fn sweep_resuming(
        &self,
        now: DateTime<Utc>,
        resume: &SweepResume,
    ) -> Result<SweepReport, LifecycleError> {
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
                    match self.jobs.queue.send(&job, 0).await {
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
                    match self.jobs.settle_end(&record).instrument(span).await {
                        Ok(released) => report.released += usize::from(released),
                        Err(e) => {
                            warn!(job_id = %record.job.id, error = %e, "ended job not settled; next pass tries again");
                            report.errors += 1;
                        }
                    }
                }
            }
            Err(e) => {
                warn!(error = %e, "ended jobs could not be listed; next pass tries again");
                report.errors += 1;
            }
        }
        self.sweep_active(now, resume, &mut report).await;
        self.sweep_approvals(now, &mut report).await;
        self.sweep_drift(now, &mut report).await;
        self.sweep_expiry(now, &mut report).await;
        self.sweep_secrets(now, &mut report).await;
        self.sweep_audit(now, &mut report).await;
        Ok(report)
    }

    /// Looks at every active job, page by page to the end of the list (at most
    /// [`MAX_ACTIVE_PAGES`] pages), one job at a time: one job's failure is counted and the
    /// others go on. Once the pass has spent [`SweepSettings::active_budget`], it looks at no
    /// more jobs but goes on reading to count them ([`SweepReport::active_left`]), and
    /// records in `resume` the page where it stopped, for the next pass to start there.
    async fn sweep_active(
        &self,
        now: DateTime<Utc>,
        resume: &SweepResume,
        report: &mut SweepReport,
    ) {
        let started = std::time::Instant::now();
        let budget = self.settings.active_budget.to_std().unwrap_or_default();
        // Where to start: this process's own resume point, else the one kept in the table
        // (a pass that died left it where it was), else the oldest job.
        let mut saved = match self.jobs.store.sweep_cursor().await {
            Ok(stored) => Some(stored),
            Err(e) => {
                warn!(error = %e, "the sweep's cursor could not be read; this pass does not keep it");
                None
            }
        };
        let mut cursor = resume
            .take()
            .or_else(|| saved.as_ref().and_then(|s| s.cursor.clone()));
        let resumed = cursor.is_some();
        let (mut looked_at, mut pages) = (0usize, 0usize);
        // The cursor of the page the budget ran out in: the next pass reads it again.
        let mut stopped_at: Option<Option<String>> = None;
        loop {
            if pages >= MAX_ACTIVE_PAGES {
                warn!(
                    pages,
                    "active jobs: stopped at the bound on pages; the rest is not counted"
                );
                break;
            }
            let page = match self
                .jobs
                .store
                .active_jobs_page(cursor.as_deref(), self.settings.batch)
                .await
            {
                Ok(page) => page,
                // Where the pass before stopped cannot be read from: start from the oldest.
                Err(e) if pages == 0 && cursor.is_some() => {
                    warn!(error = %e, "active jobs could not be resumed; starting from the oldest");
                    cursor = None;
                    continue;
                }
                Err(e) => {
                    warn!(error = %e, "active jobs could not be listed; next pass tries again");
                    report.errors += 1;
                    break;
                }
            };
            pages += 1;
            // Kept before the page's jobs are looked at: a pass that dies among them is
            // resumed at this page, not at the oldest job.
            self.save_cursor(&mut saved, cursor.as_deref()).await;
            let spent = |stopped_at: &mut Option<Option<String>>| {
                let spent = started.elapsed() >= budget;
                if spent {
                    stopped_at.get_or_insert_with(|| cursor.clone());
                }
                spent
            };
            for u in &page.listed.unreadable {
                if spent(&mut stopped_at) {
                    report.active_left += 1;
                } else {
                    self.fail_unreadable(u, now, report).await;
                }
            }
            for record in page.listed.records {
                if spent(&mut stopped_at) {
                    report.active_left += 1;
                    continue;
                }
                looked_at += 1;
                let span = tracing::info_span!("job", job_id = %record.job.id);
                if let Err(e) = self.sweep_one(record, now, report).instrument(span).await {
                    warn!(error = %e, "sweep of a job failed; next pass tries again");
                    report.errors += 1;
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let next = stopped_at.clone().flatten();
        self.save_cursor(&mut saved, next.as_deref()).await;
        if let Some(at) = stopped_at {
            resume.set(at);
            warn!(
                looked_at,
                left = report.active_left,
                pages,
                resumed,
                "the sweep's budget for active jobs was spent; the next pass starts with those left"
            );
        } else {
            info!(looked_at, pages, resumed, "active jobs swept");
        }
    }

    /// Keeps `to` in the table as where the next pass resumes, if it changed. `saved` is the
    /// cursor as this pass last read or wrote it; when another pass moved it meanwhile (the
    /// conditional write fails), this pass stops keeping it.
    async fn save_cursor(&self, saved: &mut Option<sortie_store::SweepCursor>, to: Option<&str>) {
        let Some(stored) = saved.as_mut() else {
            return;
        };
        if stored.cursor.as_deref() == to {
            return;
        }
        match self.jobs.store.save_sweep_cursor(to, stored.version).await {
            Ok(version) => {
                stored.cursor = to.map(str::to_string);
                stored.version = version;
            }
            Err(StoreError::VersionMismatch { .. }) => {
                warn!("another sweep pass moved the sweep's cursor; this one stops keeping it");
                *saved = None;
            }
            Err(e) => warn!(error = %e, "the sweep's cursor could not be kept"),
        }
    }

    /// Discards every reviewed job whose approval deadline passed, one by one.
    async fn sweep_approvals(&self, now: DateTime<Utc>, report: &mut SweepReport) {
        let listed = match self
            .jobs
            .store
            .approvals_due(now, self.settings.batch)
            .await
        {
            Ok(listed) => listed,
            Err(e) => {
                warn!(error = %e, "jobs awaiting approval could not be listed; next pass tries again");
                report.errors += 1;
                return;
            }
        };
        for u in &listed.unreadable {
            self.fail_unreadable(u, now, report).await;
        }
        for record in listed {
            let span = tracing::info_span!("job", job_id = %record.job.id);
            let timeout = record
                .job
                .review
                .as_ref()
                .map(|r| r.timeout_seconds)
                .unwrap_or_default();
            let comment = if record.job.approved_awaiting_pull_request() {
                format!(
                    "approved, but the pull request's requirements did not hold within the approval timeout ({})",
                    human_seconds(timeout)
                )
            } else {
                format!(
                    "no decision within the approval timeout ({})",
                    human_seconds(timeout)
                )
            };
            let scope = crate::audit::system_scope(
                crate::APPROVAL_TIMEOUT_PRINCIPAL,
                "approval_timed_out",
                format!("/v1/jobs/{}", record.job.id),
                record.job.environment.group().org(),
            );
            match scope
                .run(Box::pin(self.jobs.review(
                    &record,
                    crate::APPROVAL_TIMEOUT_PRINCIPAL,
                    sortie_core::ReviewVerdict::Discarded,
                    Some(comment),
                    now,
                )))
                .instrument(span)
                .await
            {
                Ok(Ok(_)) => {
                    info!(job_id = %record.job.id, "approval timed out; plan discarded");
                    report.approvals_timed_out += 1;
                }
                // Decided meanwhile: nothing to do.
                Ok(Err(_)) => {}
                Err(e) => {
                    warn!(job_id = %record.job.id, error = %e, "approval timeout not applied; next pass tries again");
                    report.errors += 1;
                }
            }
        }
    }

    /// Fires every due drift schedule, one environment at a time.
    async fn sweep_drift(&self, now: DateTime<Utc>, report: &mut SweepReport) {
        let due = match self
            .jobs
            .store
            .due_drift_checks(now, self.settings.batch)
            .await
        {
            Ok(due) => due,
            Err(e) => {
                warn!(error = %e, "due drift checks could not be listed; next pass tries again");
                report.errors += 1;
                return;
            }
        };
        for env in due {
            let path = env.environment.path.clone();
            let span = tracing::info_span!("drift", environment = %path);
            if let Err(e) = self.fire_drift(env, now, report).instrument(span).await {
                warn!(environment = %path, error = %e, "drift check not fired; next pass tries again");
                report.errors += 1;
            }
        }
    }

    /// One due drift check: skipped (and recorded so) when the environment is busy or has no
    /// successful apply; else a `plan -detailed-exitcode` of the latest apply's configuration,
    /// requested by `sortie:drift`, written only if the environment is still idle. The
    /// schedule moves on from `now` (a missed fire is never made up: checks never pile up),
    /// on condition that no other sweep fired it first.
    async fn fire_drift(
        &self,
        env: sortie_store::EnvironmentRecord,
        now: DateTime<Utc>,
        report: &mut SweepReport,
    ) -> Result<(), LifecycleError> {
        use sortie_core::drift::{DriftSchedule, DriftSkipped, DRIFT_PRINCIPAL};
        let store = &self.jobs.store;
        let path = env.environment.path.clone();
        let Some(fired) = env.next_drift_at else {
            return Ok(());
        };
        let next = env
            .environment
            .settings
            .drift_schedule
            .as_deref()
            .and_then(|s| DriftSchedule::parse(s).ok())
            .and_then(|s| s.next_after(now));
        let skipped = |reason: String| DriftSkipped { at: now, reason };
        let skip_reason = match (&env.active_job, &env.last_apply) {
            (Some(active), _) => Some(format!(
                "the environment was busy with job {active}; this check is skipped, not queued"
            )),
            (None, None) => Some(
                "no successful apply since the environment was created or last destroyed: a drift check plans the configuration of its latest successful apply".to_string(),
            ),
            _ => None,
        };
        if let Some(reason) = skip_reason {
            if store
                .advance_drift(&path, fired, next, Some(&skipped(reason.clone())))
                .await?
            {
                info!(%reason, "drift check skipped");
                report.drift_skipped += 1;
            }
            return Ok(());
        }
        let Some(last) = env.last_apply.as_ref() else {
            return Ok(());
        };
        let last_job = store.get_job(&last.job_id).await?;
        if !last_job.job.request.sensitive_variables.is_empty() {
            // Their values were deleted with the apply's secrets: a plan without them
            // would report a drift that is not one, or fail.
            let reason = format!(
                "the latest successful apply ({}) had sensitive variables, whose values are not kept after a job",
                last.job_id
            );
            if store
                .advance_drift(&path, fired, next, Some(&skipped(reason.clone())))
                .await?
            {
                info!(%reason, "drift check skipped");
                report.drift_skipped += 1;
            }
            return Ok(());
        }
        // Claim this fire first: two sweeps never both run it.
        if !store.advance_drift(&path, fired, next, None).await? {
            return Ok(());
        }
        let mut order = crate::JobOrder::again(
            &last_job.job.request,
            sortie_core::Operation::Plan,
            DRIFT_PRINCIPAL,
            now,
        );
        order.drift_check = true;
        order.write = crate::WriteMode::IfIdle;
        let skip = match self.jobs.submit_for(&env.environment, order).await {
            Ok(submitted) => {
                info!(job_id = %submitted.job.id, last_apply = %last.job_id, "drift check submitted");
                report.drift_checks += 1;
                return Ok(());
            }
            // A job took the lock between the list and the submit.
            Err(crate::SubmitError::Busy(_)) => {
                "the environment became busy; this check is skipped, not queued".to_string()
            }
            Err(crate::SubmitError::Store(e)) => return Err(e.into()),
            // Locked (or frozen above): the skip says who locked it, when and why.
            Err(e @ crate::SubmitError::Locked { .. }) => {
                format!("{e}; this check is skipped until it is unlocked")
            }
            // Its runner was deleted: recorded as a skip, never retried every pass.
            Err(e) => e.to_string(),
        };
        if let Some(next) = next {
            store
                .advance_drift(&path, next, Some(next), Some(&skipped(skip)))
                .await?;
        }
        report.drift_skipped += 1;
        Ok(())
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
        // At most one observation per job per pass: oversee, observe, oversee again.
        for _ in 0..2 {
            let step = oversee(&facts, &seen, now, self.timing());
            match step {
                // An agent job has no platform to look in: unoffered after the lease, it is
                // requeued (and offered again).
                Oversight::Find if agent_runner(&record.job).is_some() => seen = Seen::Found(None),
                Oversight::Find => seen = Seen::Found(self.launcher.find(&record.job).await?),
                Oversight::Describe => {
                    let Some(task) = record.task.as_ref() else {
                        return Ok(());
                    };
                    // A claimed job's platform is its heartbeat record.
                    if let Some(hold) = &record.agent {
                        seen = match sortie_core::agent_pool::agent_status(
                            hold,
                            now,
                            self.settings.agent_silence,
                            self.settings.agent_stop_grace,
                        ) {
                            sortie_core::agent_pool::AgentStatus::Running => Seen::Running,
                            sortie_core::agent_pool::AgentStatus::Stopped(stop) => {
                                Seen::Stopped(stop)
                            }
                        };
                        continue;
                    }
                    seen = match self.launcher.describe(&record.job, task).await? {
                        TaskStatus::Running => Seen::Running,
                        TaskStatus::Stopped(stop) => Seen::Stopped(stop),
                        TaskStatus::Missing => Seen::Missing,
                    };
                }
                step => {
                    let counted = match &step {
                        Oversight::Adopt(_) => Some(&mut report.adopted),
                        Oversight::Requeue { .. } => Some(&mut report.requeued),
                        Oversight::Stop { timeout: true, .. }
                            if record.timeout_requested_at.is_none() =>
                        {
                            Some(&mut report.timed_out)
                        }
                        Oversight::End(_) => Some(&mut report.resolved),
                        _ => None,
                    };
                    let is_stop = matches!(step, Oversight::Stop { .. });
                    let task = match &seen {
                        Seen::Stopped(_) => record.task.clone(),
                        _ => None,
                    };
                    let moved = self
                        .carry_out_as(&record, step, task.as_ref(), true)
                        .await?;
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

/// The most pages of active jobs one pass reads: a bound on the loop, far above any real
/// count (with pages of 100, a million jobs).
const MAX_ACTIVE_PAGES: usize = 10_000;

/// `3600` as `1h`, `86400` as `24h`, `90` as `90s`.
fn human_seconds(seconds: u32) -> String {
    if seconds.is_multiple_of(3600) && seconds > 0 {
        format!("{}h", seconds / 3600)
    } else if seconds.is_multiple_of(60) && seconds > 0 {
        format!("{}m", seconds / 60)
    } else {
        format!("{seconds}s")
    }
}
