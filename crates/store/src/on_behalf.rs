//! The job a piece of work is for, carried as a task-local: the engine's handling of a
//! task event or a dispatch message runs inside [`for_job`], and every AWS request it
//! makes, one that names the job or not (an environment's read, a queue's query), can say
//! which job it is for ([`current_job`]). `sortie dev` puts it in an `x-sortie-job` header
//! of its requests to the local AWS, so moto's timing (`scripts/moto_server.py`, patch 5)
//! counts each request for the job whose time it is.

use std::future::Future;

tokio::task_local! {
    static JOB: String;
}

/// Runs `work` on behalf of `job` (the task-local is seen by `work` and everything it
/// awaits in the same task, not by tasks it spawns). The future holds `work` once (no
/// extra copy of a large future).
pub fn for_job<F: Future>(job: &str, work: F) -> impl Future<Output = F::Output> {
    JOB.scope(job.to_string(), work)
}

/// The job the current work is for, inside [`for_job`].
pub fn current_job() -> Option<String> {
    JOB.try_with(Clone::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_job_is_seen_inside_its_scope_and_in_what_it_joins_only() {
        assert_eq!(current_job(), None);
        let inner = for_job("01jabcdefghjkmnpqrstvwxyz0", async {
            let (a, b) = tokio::join!(async { current_job() }, async { current_job() });
            let spawned = tokio::spawn(async { current_job() }).await.unwrap();
            (a, b, spawned)
        })
        .await;
        let id = Some("01jabcdefghjkmnpqrstvwxyz0".to_string());
        assert_eq!(inner, (id.clone(), id, None));
        assert_eq!(current_job(), None, "nothing left behind");
    }
}
