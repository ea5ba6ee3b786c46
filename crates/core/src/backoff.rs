//! Backoff with jitter, a leaf of the domain (it imports nothing from it): the launch
//! backoff that [`crate::retry`] applies to refused launches and that the expiry sweep
//! reuses for failed destroys.

/// The shortest backoff before a refused launch is tried again, in seconds.
pub const LAUNCH_BACKOFF_MIN_SECONDS: u32 = 2;
/// The longest backoff before a refused launch is tried again, in seconds (SQS allows a
/// message delay of at most 900).
pub const LAUNCH_BACKOFF_MAX_SECONDS: u32 = 300;

/// The backoff before the `refusals`-th refused launch in a row is tried again: a ceiling
/// of 2, 4, 8, … seconds, at most [`LAUNCH_BACKOFF_MAX_SECONDS`], and a delay drawn from
/// `seed` between half the ceiling and the ceiling ("equal jitter"), never below
/// [`LAUNCH_BACKOFF_MIN_SECONDS`].
pub fn launch_retry_delay_seconds(refusals: u32, seed: u64) -> u32 {
    let exponent = refusals.clamp(1, 16) - 1;
    let ceiling = (u64::from(LAUNCH_BACKOFF_MIN_SECONDS) << exponent)
        .min(u64::from(LAUNCH_BACKOFF_MAX_SECONDS));
    let half = ceiling / 2;
    let jitter = mix(seed) % (ceiling - half + 1);
    u32::try_from(half + jitter)
        .unwrap_or(LAUNCH_BACKOFF_MAX_SECONDS)
        .clamp(LAUNCH_BACKOFF_MIN_SECONDS, LAUNCH_BACKOFF_MAX_SECONDS)
}

/// The jitter's seed for a job's `refusals`-th refusal in a row: the same for the
/// dispatcher and for the API's "next try in" (FNV-1a of the id and the count).
pub fn jitter_seed(job_id: &str, refusals: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in job_id.bytes().chain(refusals.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// SplitMix64's finaliser: spreads a seed's bits.
pub(crate) fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// "Full jitter" backoff (<https://aws.amazon.com/builders-library/timeouts-retries-and-backoff-with-jitter/>):
/// before retry `attempt` (0 for the first retry), a delay drawn from `seed` uniformly
/// between 0 and `min(cap_ms, base_ms × 2^attempt)` milliseconds. Callers that share a
/// throttled quota spread their retries over the whole window instead of retrying together.
pub fn full_jitter_millis(attempt: u32, base_ms: u64, cap_ms: u64, seed: u64) -> u64 {
    let ceiling = base_ms
        .checked_shl(attempt.min(32))
        .unwrap_or(u64::MAX)
        .min(cap_ms);
    mix(seed) % (ceiling.saturating_add(1))
}

#[cfg(test)]
mod full_jitter_tests {
    use super::full_jitter_millis;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_delay_never_passes_the_attempt_s_ceiling_nor_the_cap(
            attempt in 0u32..80, base in 1u64..1_000, cap in 1u64..100_000, seed in any::<u64>()
        ) {
            let d = full_jitter_millis(attempt, base, cap, seed);
            let ceiling = if attempt >= 32 { cap } else { (base << attempt).min(cap) };
            prop_assert!(d <= ceiling, "{d} > {ceiling}");
        }
    }

    #[test]
    fn the_delays_spread_over_the_whole_window() {
        let delays: Vec<u64> = (0..1_000)
            .map(|s| full_jitter_millis(4, 100, 5_000, s))
            .collect();
        let (lo, hi) = (delays.iter().min().unwrap(), delays.iter().max().unwrap());
        assert!(*lo < 160 && *hi > 1_440, "0..=1600 ms, got {lo}..={hi}");
    }
}
