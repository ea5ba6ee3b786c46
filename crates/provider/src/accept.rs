//! The accept loop in front of the gRPC server: each TCP connection gets its TLS
//! handshake in a task of its own, at most [`Limits::handshakes`] at once and each within
//! [`Limits::handshake_timeout`]; an `accept` error (file descriptors exhausted, say) is
//! retried after a bounded backoff, never in a tight loop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};

/// The accept loop's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// At most this many handshakes at once (and connections accepted but not yet handed
    /// to the server); the loop stops accepting until one ends.
    pub handshakes: usize,
    /// A handshake not done in this time is dropped, with its connection.
    pub handshake_timeout: Duration,
    /// The first wait after an `accept` error; it doubles on each error in a row.
    pub backoff_min: Duration,
    /// The longest wait after an `accept` error.
    pub backoff_max: Duration,
}

/// The provider's bounds: Terraform opens one connection (two at most); these leave room
/// and stop a local process that floods the port from holding tasks and memory.
pub const LIMITS: Limits = Limits {
    handshakes: 16,
    handshake_timeout: Duration::from_secs(10),
    backoff_min: Duration::from_millis(10),
    backoff_max: Duration::from_secs(1),
};

/// The wait after each `accept` error in a row: `min`, doubled each time up to `max`;
/// back to `min` after a success.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    min: Duration,
    max: Duration,
}

impl Backoff {
    /// A backoff from `min` to `max`.
    pub fn new(min: Duration, max: Duration) -> Self {
        Self {
            next: min,
            min,
            max: max.max(min),
        }
    }

    /// The wait after one more error in a row.
    pub fn wait(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        wait
    }

    /// After a success: the next error waits `min` again.
    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

/// Accepts connections with `accept` and hands each, once `handshake` made it a
/// connection to serve, to `conns`, within `limits`. Ends when `conns` is closed (the
/// server stopped).
pub async fn serve<S, C, A, AF, H, HF>(
    mut accept: A,
    handshake: H,
    conns: mpsc::Sender<std::io::Result<C>>,
    limits: Limits,
) where
    A: FnMut() -> AF,
    AF: Future<Output = std::io::Result<S>>,
    H: Fn(S) -> HF,
    HF: Future<Output = std::io::Result<C>> + Send + 'static,
    C: Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.handshakes.max(1)));
    let mut backoff = Backoff::new(limits.backoff_min, limits.backoff_max);
    while !conns.is_closed() {
        // A slot first: with every slot taken, connections wait in the kernel's backlog.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match accept().await {
            Ok(stream) => {
                backoff.reset();
                stream
            }
            Err(e) => {
                let wait = backoff.wait();
                eprintln!(
                    "terraform-provider-sortie: accepting a connection failed: {e} (again in {} ms)",
                    wait.as_millis()
                );
                drop(slot);
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        let shake = handshake(stream);
        let conns = conns.clone();
        let timeout = limits.handshake_timeout;
        tokio::spawn(async move {
            // The slot is held until the connection is handed on (or dropped).
            let _slot = slot;
            match tokio::time::timeout(timeout, shake).await {
                Ok(Ok(conn)) => {
                    let _ = conns.send(Ok(conn)).await;
                }
                Ok(Err(e)) => eprintln!("terraform-provider-sortie: a TLS handshake failed: {e}"),
                Err(_) => eprintln!(
                    "terraform-provider-sortie: a TLS handshake took more than {} s: connection dropped",
                    timeout.as_secs()
                ),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const FAST: Limits = Limits {
        handshakes: 4,
        handshake_timeout: Duration::from_millis(300),
        backoff_min: Duration::from_millis(10),
        backoff_max: Duration::from_millis(80),
    };

    /// Counts handshakes in flight (and the most at once) while its guard lives.
    #[derive(Default)]
    struct InFlight {
        now: AtomicUsize,
        most: AtomicUsize,
    }

    struct Guard(Arc<InFlight>);

    impl InFlight {
        fn enter(self: &Arc<Self>) -> Guard {
            let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            Guard(self.clone())
        }
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.now.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A handshake that never ends (a client that connects and sends nothing), counted
    /// in `flight` from its start until it is dropped.
    fn stuck(
        flight: Arc<InFlight>,
    ) -> impl Fn(()) -> std::pin::Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>> {
        move |()| {
            let guard = flight.enter();
            Box::pin(async move {
                let _guard = guard;
                std::future::pending().await
            })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn handshakes_are_bounded_and_each_ends_at_its_timeout() {
        let flight = Arc::new(InFlight::default());
        let accepted = Arc::new(AtomicUsize::new(0));
        let (tx, _rx) = mpsc::channel(4);
        let counter = accepted.clone();
        // A flood of connections that never finish their handshake.
        let task = tokio::spawn(serve(
            move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async {
                    tokio::task::yield_now().await;
                    Ok(())
                }
            },
            stuck(flight.clone()),
            tx,
            FAST,
        ));
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(flight.most.load(Ordering::SeqCst), FAST.handshakes);
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            FAST.handshakes,
            "no connection is accepted while every slot is taken"
        );
        // Past the timeout, the first ones are dropped and as many new ones taken.
        tokio::time::sleep(FAST.handshake_timeout + Duration::from_millis(100)).await;
        let accepted_now = accepted.load(Ordering::SeqCst);
        assert!(
            accepted_now >= 2 * FAST.handshakes,
            "{accepted_now} accepted after one timeout"
        );
        assert!(flight.now.load(Ordering::SeqCst) <= FAST.handshakes);
        assert_eq!(flight.most.load(Ordering::SeqCst), FAST.handshakes);
        task.abort();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_handshake_that_never_ends_is_dropped_after_the_timeout() {
        let flight = Arc::new(InFlight::default());
        let (tx, _rx) = mpsc::channel(4);
        let mut once = Some(());
        let task = tokio::spawn(serve(
            move || {
                let next = once.take();
                async move {
                    match next {
                        Some(()) => Ok(()),
                        None => std::future::pending().await,
                    }
                }
            },
            stuck(flight.clone()),
            tx,
            FAST,
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(flight.now.load(Ordering::SeqCst), 1);
        tokio::time::sleep(FAST.handshake_timeout).await;
        assert_eq!(
            flight.now.load(Ordering::SeqCst),
            0,
            "the handshake still runs"
        );
        task.abort();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn accept_errors_back_off_instead_of_spinning() {
        let calls = Arc::new(AtomicUsize::new(0));
        let (tx, _rx) = mpsc::channel::<std::io::Result<()>>(4);
        let counter = calls.clone();
        let task = tokio::spawn(serve(
            move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async {
                    tokio::task::yield_now().await;
                    Err::<(), _>(std::io::Error::other("too many open files"))
                }
            },
            |()| async { Ok(()) },
            tx,
            FAST,
        ));
        // 10 + 20 + 40 + 80 + 80 + 80 + 80 ms: 7 or 8 tries in 500 ms, not thousands.
        tokio::time::sleep(Duration::from_millis(500)).await;
        task.abort();
        let n = calls.load(Ordering::SeqCst);
        assert!((2..=12).contains(&n), "{n} accepts in 500 ms");
    }

    #[test]
    fn the_backoff_doubles_up_to_its_bound_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
        let waits: Vec<u128> = (0..9).map(|_| b.wait().as_millis()).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.reset();
        assert_eq!(b.wait(), Duration::from_millis(10));
    }
}
