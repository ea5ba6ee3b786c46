//! The EKS bearer token, built the way `aws eks get-token` builds it, with no shell-out: a
//! presigned STS `GetCallerIdentity` URL, signed (SigV4, in the query) with the header
//! `x-k8s-aws-id: <cluster>`, valid for 60 seconds, base64url without padding, prefixed
//! `k8s-aws-v1.`. The cluster's authenticator calls that URL to learn who holds the token.

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use base64::Engine as _;

use crate::LaunchError;

/// Every EKS token starts with this.
pub const TOKEN_PREFIX: &str = "k8s-aws-v1.";
/// The header that binds a token to one cluster.
pub const CLUSTER_ID_HEADER: &str = "x-k8s-aws-id";
/// How long the presigned URL is valid (`X-Amz-Expires`), as `aws eks get-token` makes it.
pub const TOKEN_EXPIRY: Duration = Duration::from_secs(60);

/// The regional STS endpoint the token's URL names, in the region's partition:
/// `sts.<region>.amazonaws.com.cn` in China (`aws-cn`), `sts.<region>.amazonaws.com`
/// in the commercial (`aws`) and GovCloud (`aws-us-gov`) partitions.
pub fn sts_url(region: &str) -> String {
    format!(
        "https://{}/?Action=GetCallerIdentity&Version=2011-06-15",
        sts_host(region)
    )
}

/// The STS host of `region` (AWS STS Regions and endpoints, IAM User Guide).
pub fn sts_host(region: &str) -> String {
    format!("sts.{region}.{}", dns_suffix(region))
}

/// The DNS suffix of `region`'s partition: `amazonaws.com.cn` in China (`aws-cn`),
/// `amazonaws.com` in the commercial (`aws`) and GovCloud (`aws-us-gov`) partitions.
pub fn dns_suffix(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    }
}

/// A bearer token for `cluster`, signed with `credentials` in `region` at `now`.
pub fn bearer_token(
    credentials: &Credentials,
    cluster: &str,
    region: &str,
    now: SystemTime,
) -> Result<String, LaunchError> {
    let identity: Identity = credentials.clone().into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(TOKEN_EXPIRY);
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| LaunchError::Fatal(format!("could not sign the EKS token: {e}")))?
        .into();
    let url = sts_url(region);
    let headers = [(CLUSTER_ID_HEADER, cluster)];
    let signable = SignableRequest::new(
        "GET",
        &url,
        headers.iter().copied(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| LaunchError::Fatal(format!("could not sign the EKS token: {e}")))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| LaunchError::Fatal(format!("could not sign the EKS token: {e}")))?
        .into_parts();
    let mut request = http::Request::builder()
        .method("GET")
        .uri(&url)
        .header(CLUSTER_ID_HEADER, cluster)
        .body(())
        .map_err(|e| LaunchError::Fatal(format!("could not sign the EKS token: {e}")))?;
    instructions.apply_to_request_http1x(&mut request);
    let signed = request.uri().to_string();
    Ok(format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signed)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(url: &str) -> std::collections::BTreeMap<String, String> {
        let (_, q) = url.split_once('?').unwrap();
        q.split('&')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (k.to_string(), percent_decode(v))
            })
            .collect()
    }

    fn percent_decode(v: &str) -> String {
        let bytes = v.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                out.push(u8::from_str_radix(&v[i + 1..i + 3], 16).unwrap());
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_sts_host_is_the_region_s_partition_s() {
        assert_eq!(sts_host("eu-west-1"), "sts.eu-west-1.amazonaws.com");
        assert_eq!(sts_host("cn-north-1"), "sts.cn-north-1.amazonaws.com.cn");
        assert_eq!(
            sts_host("cn-northwest-1"),
            "sts.cn-northwest-1.amazonaws.com.cn"
        );
        assert_eq!(sts_host("us-gov-west-1"), "sts.us-gov-west-1.amazonaws.com");
        assert_eq!(sts_host("us-gov-east-1"), "sts.us-gov-east-1.amazonaws.com");
    }

    #[test]
    fn a_china_token_names_the_china_sts_host_and_signs_for_its_region() {
        let creds = Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        for (region, host) in [
            ("cn-north-1", "https://sts.cn-north-1.amazonaws.com.cn/?"),
            ("us-gov-west-1", "https://sts.us-gov-west-1.amazonaws.com/?"),
        ] {
            let token = bearer_token(&creds, "c", region, now).unwrap();
            let url = String::from_utf8(
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(token.strip_prefix(TOKEN_PREFIX).unwrap())
                    .unwrap(),
            )
            .unwrap();
            assert!(url.starts_with(host), "{url}");
            assert_eq!(
                query(&url)["X-Amz-Credential"],
                format!("AKIDEXAMPLE/20231114/{region}/sts/aws4_request")
            );
        }
    }

    #[test]
    fn the_token_is_a_presigned_get_caller_identity_url_bound_to_the_cluster_for_60_seconds() {
        let creds = Credentials::new(
            "AKIDEXAMPLE",
            "secret",
            Some("session-token".into()),
            None,
            "test",
        );
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let token = bearer_token(&creds, "prod-cluster", "eu-west-1", now).unwrap();
        let encoded = token
            .strip_prefix(TOKEN_PREFIX)
            .expect("k8s-aws-v1. prefix");
        assert!(!encoded.contains('='), "no padding: {encoded}");
        assert!(
            !encoded.contains('+') && !encoded.contains('/'),
            "base64url: {encoded}"
        );
        let url = String::from_utf8(
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(encoded)
                .unwrap(),
        )
        .unwrap();
        assert!(
            url.starts_with("https://sts.eu-west-1.amazonaws.com/?"),
            "{url}"
        );
        let q = query(&url);
        assert_eq!(q["Action"], "GetCallerIdentity");
        assert_eq!(q["Version"], "2011-06-15");
        assert_eq!(q["X-Amz-Algorithm"], "AWS4-HMAC-SHA256");
        assert_eq!(q["X-Amz-Expires"], "60");
        assert_eq!(q["X-Amz-Date"], "20231114T221320Z");
        assert_eq!(
            q["X-Amz-Credential"],
            "AKIDEXAMPLE/20231114/eu-west-1/sts/aws4_request"
        );
        let signed: Vec<&str> = q["X-Amz-SignedHeaders"].split(';').collect();
        assert!(
            signed.contains(&"host") && signed.contains(&CLUSTER_ID_HEADER),
            "{signed:?}"
        );
        assert_eq!(q["X-Amz-Security-Token"], "session-token");
        assert_eq!(q["X-Amz-Signature"].len(), 64);
        // Bound to the cluster: another cluster's token has another signature.
        let other = bearer_token(&creds, "other-cluster", "eu-west-1", now).unwrap();
        assert_ne!(token, other);
    }
}
