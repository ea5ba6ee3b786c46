//! The two read-only EC2 calls of the `ecs-fargate` network check, DescribeSubnets and
//! DescribeSecurityGroups, over EC2's Query API: a form-encoded POST signed with SigV4
//! (service `ec2`), answered in XML.
//!
//! Not `aws-sdk-ec2`: that crate is the largest of the SDK (over 600 MB of debug artifacts
//! and minutes of a 2-core build) for two calls; see
//! `docs/decisions/runner-check.md`, "EC2 without its SDK". The request is written by
//! `aws-smithy-query` and the answer read by `aws-smithy-xml`, the crates the SDK itself
//! uses for this protocol, and signed by `aws-sigv4`.
//!
//! EC2's documented shapes, from the EC2 API Reference ("DescribeSubnets",
//! "DescribeSecurityGroups", "Error codes", "Query requests"):
//! - lists are flat and 1-based: `SubnetId.1=subnet-…&SubnetId.2=…`, `GroupId.1=sg-…`;
//! - with ids given, every match is in one answer (`MaxResults` cannot be combined with
//!   `GroupIds`; a runner names at most 16 subnets and 5 security groups);
//! - an answer lists `<subnetSet><item>` or `<securityGroupInfo><item>`, whose own
//!   `subnetId`/`groupId` and `vpcId` are direct children (nested items, such as a rule's
//!   `groups`, carry ids too and are not read);
//! - a refusal is `<Response><Errors><Error><Code>…</Code><Message>…</Message>`.

use std::time::{Duration, SystemTime};

use aws_config::SdkConfig;
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use aws_smithy_query::QueryWriter;
use aws_smithy_runtime_api::client::identity::Identity;
use aws_smithy_xml::decode::{try_data, Document, ScopedDecoder};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// The EC2 API version every Query request names.
pub const EC2_API_VERSION: &str = "2016-11-15";
/// How long one attempt may take, connection included.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts per call: a throttle, a 5xx or a dropped connection is tried again, up to this.
const ATTEMPTS: u32 = 3;
/// The largest answer read: far above 16 subnets or 5 groups with their rules.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// An EC2 resource found by a describe call: its id and the VPC it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// `subnet-…` or `sg-…`.
    pub id: String,
    /// `vpc-…` (empty if EC2 gave none).
    pub vpc: String,
}

/// A signed EC2 Query client for one region and one set of credentials.
pub struct Ec2Query {
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    endpoint: String,
    region: String,
    credentials: Credentials,
}

impl Ec2Query {
    /// A client for `region` with `credentials`; the endpoint is `base`'s override (moto,
    /// a VPC endpoint) or EC2's regional endpoint.
    pub fn new(base: &SdkConfig, region: &str, credentials: Credentials) -> Result<Self, String> {
        let endpoint = base
            .endpoint_url()
            .map(|u| u.trim_end_matches('/').to_string())
            .unwrap_or_else(|| format!("https://{}", ec2_host(region)));
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(ATTEMPT_TIMEOUT));
        let https = sortie_http::connector(endpoint.starts_with("https:"), http)?;
        Ok(Self {
            http: Client::builder(TokioExecutor::new()).build(https),
            endpoint,
            region: region.to_string(),
            credentials,
        })
    }

    /// DescribeSubnets for `ids`: each subnet found, with its VPC.
    pub async fn describe_subnets(&self, ids: &[String]) -> Result<Vec<Located>, String> {
        let body = query_body("DescribeSubnets", "SubnetId", ids);
        let xml = self.call("DescribeSubnets", body).await?;
        located(&xml, "subnetSet", "subnetId").map_err(|e| unreadable("DescribeSubnets", &e))
    }

    /// DescribeSecurityGroups for `ids`: each group found, with its VPC.
    pub async fn describe_security_groups(&self, ids: &[String]) -> Result<Vec<Located>, String> {
        let body = query_body("DescribeSecurityGroups", "GroupId", ids);
        let xml = self.call("DescribeSecurityGroups", body).await?;
        located(&xml, "securityGroupInfo", "groupId")
            .map_err(|e| unreadable("DescribeSecurityGroups", &e))
    }

    /// One call, tried up to [`ATTEMPTS`] times while the failure is one a retry may heal;
    /// the answer's text, or the failure in AWS's words.
    async fn call(&self, operation: &str, body: String) -> Result<String, String> {
        let mut last = String::new();
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
            }
            match self.attempt(operation, &body).await {
                Ok(Answer::Done(text)) => return Ok(text),
                Ok(Answer::Refused { status, text }) => {
                    let (code, message) = error_of(&text)
                        .unwrap_or_else(|| (format!("HTTP {status}"), one_line(&text)));
                    last = format!("{operation} failed: {code}: {message}");
                    if !retryable(status, &code) {
                        return Err(last);
                    }
                }
                Err(e) => last = format!("{operation} failed: {e}"),
            }
        }
        Err(last)
    }

    async fn attempt(&self, operation: &str, body: &str) -> Result<Answer, String> {
        let request = self.signed(body, SystemTime::now())?;
        let answer = tokio::time::timeout(ATTEMPT_TIMEOUT, async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|e| format!("could not reach EC2: {e}"))?;
            let status = response.status().as_u16();
            let bytes = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| format!("could not read EC2's answer: {e}"))?
                .to_bytes();
            Ok::<_, String>((status, String::from_utf8_lossy(&bytes).into_owned()))
        })
        .await
        .map_err(|_| format!("no answer from EC2 to {operation} in {ATTEMPT_TIMEOUT:?}"))??;
        let (status, text) = answer;
        Ok(if (200..300).contains(&status) {
            Answer::Done(text)
        } else {
            Answer::Refused { status, text }
        })
    }

    /// The POST of `body`, signed (SigV4, in the headers) at `now`.
    fn signed(&self, body: &str, now: SystemTime) -> Result<http::Request<Full<Bytes>>, String> {
        let url = format!("{}/", self.endpoint);
        let content_type = "application/x-www-form-urlencoded; charset=utf-8";
        let identity: Identity = self.credentials.clone().into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("ec2")
            .time(now)
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| format!("could not sign the EC2 request: {e}"))?
            .into();
        let headers = [("content-type", content_type)];
        let signable = SignableRequest::new(
            "POST",
            &url,
            headers.iter().copied(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .map_err(|e| format!("could not sign the EC2 request: {e}"))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| format!("could not sign the EC2 request: {e}"))?
            .into_parts();
        let mut request = http::Request::builder()
            .method("POST")
            .uri(&url)
            .header("content-type", content_type)
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| format!("could not build the EC2 request: {e}"))?;
        instructions.apply_to_request_http1x(&mut request);
        Ok(request)
    }
}

enum Answer {
    Done(String),
    Refused { status: u16, text: String },
}

/// EC2's host in `region`'s partition (`ec2.<region>.amazonaws.com`, `.com.cn` in China).
pub fn ec2_host(region: &str) -> String {
    format!("ec2.{region}.{}", crate::eks::token::dns_suffix(region))
}

/// The form body of `action` with `ids` as the flat, 1-based list `param.N`.
pub fn query_body(action: &str, param: &str, ids: &[String]) -> String {
    let mut out = String::new();
    let mut writer = QueryWriter::new(&mut out, action, EC2_API_VERSION);
    let mut list = writer.prefix(param).start_list(true, None);
    for id in ids {
        list.entry().string(id);
    }
    list.finish();
    writer.finish();
    out
}

/// True where another try may succeed: a 5xx, or EC2's throttle.
fn retryable(status: u16, code: &str) -> bool {
    status >= 500
        || code == "RequestLimitExceeded"
        || code.contains("Throttl")
        || code == "Unavailable"
        || code == "InternalError"
}

fn unreadable(operation: &str, e: &str) -> String {
    format!("{operation} failed: EC2's answer could not be read: {e}")
}

fn one_line(text: &str) -> String {
    sortie_http::one_line(text).chars().take(200).collect()
}

/// The `(id, vpcId)` of each `<set><item>` of a describe answer, read from the item's
/// direct children only.
pub fn located(xml: &str, set: &str, id_tag: &str) -> Result<Vec<Located>, String> {
    let mut doc = Document::new(xml);
    let mut root = doc.root_element().map_err(|e| e.to_string())?;
    let mut found = vec![];
    while let Some(mut child) = root.next_tag() {
        if !child.start_el().matches(set) {
            continue;
        }
        while let Some(mut item) = child.next_tag() {
            if !item.start_el().matches("item") {
                continue;
            }
            found.push(item_of(&mut item, id_tag)?);
        }
    }
    Ok(found)
}

fn item_of(item: &mut ScopedDecoder<'_, '_>, id_tag: &str) -> Result<Located, String> {
    let mut id = String::new();
    let mut vpc = String::new();
    while let Some(mut field) = item.next_tag() {
        if field.start_el().matches(id_tag) {
            id = try_data(&mut field)
                .map_err(|e| e.to_string())?
                .into_owned();
        } else if field.start_el().matches("vpcId") {
            vpc = try_data(&mut field)
                .map_err(|e| e.to_string())?
                .into_owned();
        }
    }
    Ok(Located { id, vpc })
}

/// The first `<Errors><Error>`'s code and message of a refusal, if it is EC2's XML.
pub fn error_of(xml: &str) -> Option<(String, String)> {
    let mut doc = Document::new(xml);
    let mut root = doc.root_element().ok()?;
    while let Some(mut errors) = root.next_tag() {
        if !errors.start_el().matches("Errors") {
            continue;
        }
        while let Some(mut error) = errors.next_tag() {
            if !error.start_el().matches("Error") {
                continue;
            }
            let (mut code, mut message) = (String::new(), String::new());
            while let Some(mut field) = error.next_tag() {
                if field.start_el().matches("Code") {
                    code = try_data(&mut field).ok()?.into_owned();
                } else if field.start_el().matches("Message") {
                    message = try_data(&mut field).ok()?.into_owned();
                }
            }
            return Some((code, message));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_ec2s_flat_one_based_list() {
        let body = query_body(
            "DescribeSubnets",
            "SubnetId",
            &["subnet-0a".into(), "subnet-0b".into()],
        );
        assert_eq!(
            body,
            "Action=DescribeSubnets&Version=2016-11-15&SubnetId.1=subnet-0a&SubnetId.2=subnet-0b"
        );
    }

    #[test]
    fn only_an_items_own_ids_are_read_not_those_of_its_rules() {
        // DescribeSecurityGroups, as the EC2 API Reference shows it: a rule's
        // `groups/item` names another group in another VPC (a peering).
        let xml = r#"<DescribeSecurityGroupsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>59dbff89-35bd-4eac-99ed-be587EXAMPLE</requestId>
  <securityGroupInfo>
    <item>
      <ownerId>123456789012</ownerId>
      <groupId>sg-1a2b3c4d</groupId>
      <groupName>WebServers</groupName>
      <ipPermissions>
        <item>
          <ipProtocol>tcp</ipProtocol>
          <groups>
            <item><userId>123456789012</userId><groupId>sg-9999</groupId><vpcId>vpc-other</vpcId></item>
          </groups>
        </item>
      </ipPermissions>
      <vpcId>vpc-1a2b3c4d</vpcId>
      <tagSet><item><key>Name</key><value>web</value></item></tagSet>
    </item>
  </securityGroupInfo>
</DescribeSecurityGroupsResponse>"#;
        assert_eq!(
            located(xml, "securityGroupInfo", "groupId").unwrap(),
            vec![Located {
                id: "sg-1a2b3c4d".into(),
                vpc: "vpc-1a2b3c4d".into()
            }]
        );
    }

    #[test]
    fn subnets_are_read_with_their_vpc() {
        let xml = r#"<DescribeSubnetsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>7a62c49f-347e-4fc4-9331-6e8eEXAMPLE</requestId>
  <subnetSet>
    <item><subnetId>subnet-9d4a7b6c</subnetId><state>available</state><vpcId>vpc-1a2b3c4d</vpcId>
      <ipv6CidrBlockAssociationSet/></item>
    <item><subnetId>subnet-6e7f829e</subnetId><vpcId>vpc-1a2b3c4d</vpcId></item>
  </subnetSet>
</DescribeSubnetsResponse>"#;
        let found = located(xml, "subnetSet", "subnetId").unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[1].id, "subnet-6e7f829e");
        assert!(found.iter().all(|l| l.vpc == "vpc-1a2b3c4d"));
    }

    #[test]
    fn a_refusal_is_read_in_ec2s_words() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>InvalidSubnetID.NotFound</Code><Message>The subnet ID 'subnet-0123' does not exist</Message></Error></Errors><RequestID>ea966190-f9aa-478e-9ede-example</RequestID></Response>"#;
        assert_eq!(
            error_of(xml),
            Some((
                "InvalidSubnetID.NotFound".into(),
                "The subnet ID 'subnet-0123' does not exist".into()
            ))
        );
        assert_eq!(error_of("<html>bad gateway</html>"), None);
        assert!(retryable(503, "Unavailable"));
        assert!(retryable(400, "RequestLimitExceeded"));
        assert!(!retryable(400, "InvalidSubnetID.NotFound"));
    }

    #[test]
    fn the_host_is_in_the_regions_partition() {
        assert_eq!(ec2_host("eu-west-1"), "ec2.eu-west-1.amazonaws.com");
        assert_eq!(ec2_host("cn-north-1"), "ec2.cn-north-1.amazonaws.com.cn");
    }
}
