//! Drift remediation: the step after a drift check ended, apart from the end itself.
//!
//! [`JobService::end`] records a drift check's verdict on its environment. When the verdict
//! is `drifted`, the caller of the end runs [`JobService::remediate_drift`] next: with the
//! environment's `drift_remediation: apply`, it submits an apply (requested by
//! `sortie:drift`, subject to the environment's approval setting, through
//! [`JobService::submit_for`]) and records it on the drift status; either way it publishes
//! `sortie.environment.drifted`, naming the remediation if there is one.

use chrono::Utc;
use serde_json::json;
use sortie_core::drift::{DriftVerdict, DRIFT_PRINCIPAL};
use sortie_core::{DriftRemediation, JobId, Operation};
use sortie_store::JobRecord;
use tracing::{info, warn};

use crate::end::drift_status;
use crate::submit::{JobOrder, SubmitError};
use crate::{JobService, ENVIRONMENT_DRIFTED};

impl JobService {
    /// Answers an ended drift check that found drift: remediates it by an apply when its
    /// environment asks for it, and publishes `sortie.environment.drifted`. Best effort
    /// (failures are logged: the check's verdict is already recorded by the end); does
    /// nothing for any other job. Returns the remediation's job id, if one was submitted.
    pub async fn remediate_drift(&self, ended: &JobRecord) -> Option<JobId> {
        let job = &ended.job;
        if !job.drift_check || !job.state.is_terminal() {
            return None;
        }
        let mut status = drift_status(ended);
        if status.status != DriftVerdict::Drifted {
            return None;
        }
        match self.submit_remediation(ended).await {
            Ok(Some(id)) => {
                info!(remediation = %id, "drift remediation submitted");
                status.remediation_job_id = Some(id);
                if let Err(e) = self.store.record_drift(&job.environment, &status).await {
                    warn!(error = %e, "could not record the drift remediation");
                }
            }
            Ok(None) => {}
            Err(e) => warn!(error = %e, "drift remediation not submitted"),
        }
        let detail = json!({
            "environment": job.environment.to_string(),
            "org": job.environment.org(),
            "job_id": job.id,
            "summary": ended.summary,
            "remediation_job_id": status.remediation_job_id,
        });
        let resource = format!("sortie:environment/{}", job.environment);
        if let Err(e) = self
            .bus
            .publish(ENVIRONMENT_DRIFTED, &resource, detail)
            .await
        {
            warn!(error = %e, "publishing sortie.environment.drifted failed");
        }
        status.remediation_job_id
    }

    /// Submits the apply that remediates `check`'s drift when its environment's
    /// `drift_remediation` is `apply`: the check's request again, as an apply, for
    /// `sortie:drift`. `None` when the environment does not ask for it.
    async fn submit_remediation(&self, check: &JobRecord) -> Result<Option<JobId>, SubmitError> {
        let job = &check.job;
        let env = self.store.get_environment(&job.environment).await?;
        let environment = &env.item.environment;
        if environment.settings.drift_remediation != DriftRemediation::Apply {
            return Ok(None);
        }
        let order = JobOrder::again(&job.request, Operation::Apply, DRIFT_PRINCIPAL, Utc::now());
        let submitted = self.submit_for(environment, order).await?;
        Ok(Some(submitted.job.id))
    }
}
