//! Bounded retries of transient failures: a fixed number of attempts, the delay doubling
//! after each failure. A final failure ends at once.

use std::time::Duration;

/// How many times, and how patiently, a call is retried.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all (at least 1).
    pub attempts: u32,
    /// The delay after the first failure; doubled after each further one.
    pub first_delay: Duration,
    /// How long one attempt may take.
    pub timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            // 0.5 + 1 + 2 + … + 32 s: a pilot rides out about a minute of control-plane
            // unavailability (a restart of `sortie dev`, an API deployment).
            attempts: 8,
            first_delay: Duration::from_millis(500),
            timeout: Duration::from_secs(30),
        }
    }
}

/// One failed attempt.
#[derive(Debug)]
pub enum Failure {
    /// Worth another try.
    Transient(String),
    /// Final.
    Fatal(String),
}

/// Runs `once` until it succeeds, fails for good, or `policy`'s attempts are spent
/// (transient failures wait 0.5, 1, 2, … s between tries with the default policy); the
/// error is one line.
pub async fn retrying<T, F, Fut>(policy: &RetryPolicy, what: &str, mut once: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Failure>>,
{
    let mut delay = policy.first_delay;
    let attempts = policy.attempts.max(1);
    let mut last = format!("{what} was never attempted");
    for attempt in 1..=attempts {
        match once().await {
            Ok(answer) => return Ok(answer),
            Err(Failure::Fatal(message)) => return Err(message),
            Err(Failure::Transient(message)) => {
                if attempt < attempts {
                    tracing::warn!(what, attempt, error = %message, "call failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = delay.saturating_mul(2);
                }
                last = format!("{message} (gave up after {attempts} attempts)");
            }
        }
    }
    Err(last)
}
