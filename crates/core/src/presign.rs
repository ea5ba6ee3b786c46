//! How long a presigned URL may live. A URL signed with temporary credentials (a role
//! session: the functions' own, an assumed role's) stops working when those credentials
//! expire, whatever its `X-Amz-Expires` says
//! (<https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-presigned-url.html>, "Who
//! can create a presigned URL"). So a URL is given for no longer than the signing
//! credentials' remaining life, and says so in its expiry; and never for longer than S3
//! accepts ([`LONGEST`]).

use std::time::{Duration, SystemTime};

/// The shortest life worth giving a URL: credentials closer than this to their expiry are
/// refused (the caller asks again once the SDK has refreshed them).
pub const SHORTEST: Duration = Duration::from_secs(1);

/// The longest life S3 accepts for a SigV4 presigned URL: 7 days (604,800 s).
pub const LONGEST: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The life of a URL asked for `requested`, signed at `now` with credentials that expire at
/// `expiry` (`None`: long-term credentials, which do not): the shortest of the two and
/// [`LONGEST`], in whole seconds (`X-Amz-Expires` counts seconds). An error when the
/// credentials have less than [`SHORTEST`] left.
pub fn lifetime(
    requested: Duration,
    now: SystemTime,
    expiry: Option<SystemTime>,
) -> Result<Duration, String> {
    let requested = requested.min(LONGEST);
    let Some(expiry) = expiry else {
        return Ok(requested);
    };
    let left = expiry.duration_since(now).unwrap_or(Duration::ZERO);
    let left = Duration::from_secs(left.as_secs());
    if left < SHORTEST {
        return Err(format!(
            "the signing credentials expire in {} s; a URL signed with them would not work",
            left.as_secs()
        ));
    }
    Ok(requested.min(left))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_url_never_outlives_its_credentials_nor_the_time_asked_nor_7_days(
            requested in 1u64..1_000_000, left_ms in 0u64..2_000_000_000
        ) {
            let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
            let expiry = now + Duration::from_millis(left_ms);
            let asked = Duration::from_secs(requested);
            match lifetime(asked, now, Some(expiry)) {
                Ok(d) => {
                    prop_assert!(now + d <= expiry, "{d:?} outlives the credentials");
                    prop_assert!(d <= asked && d <= LONGEST);
                    prop_assert!(d >= SHORTEST);
                    prop_assert!(d == asked.min(LONGEST) || d.as_secs() == left_ms / 1000);
                }
                Err(e) => prop_assert!(left_ms < 1000, "{e}"),
            }
            prop_assert_eq!(lifetime(asked, now, None), Ok(asked.min(LONGEST)));
        }
    }

    #[test]
    fn long_term_credentials_keep_the_time_asked_and_expired_ones_are_refused() {
        let now = SystemTime::now();
        let asked = Duration::from_secs(600);
        assert_eq!(lifetime(asked, now, None), Ok(asked));
        assert_eq!(
            lifetime(asked, now, Some(now + Duration::from_secs(90))),
            Ok(Duration::from_secs(90))
        );
        let e = lifetime(asked, now, Some(now - Duration::from_secs(5))).unwrap_err();
        assert!(e.contains("expire in 0 s"), "{e}");
    }
}
