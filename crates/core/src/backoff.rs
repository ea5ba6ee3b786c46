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
