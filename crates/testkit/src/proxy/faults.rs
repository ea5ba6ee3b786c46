//! What the proxy does to a request it does not simply forward: its record (service and
//! operation), the faults a test queued, a lost answer, and the synthetic AWS errors.

use super::*;

/// Builds the record of a request: the AWS service and operation it names.
pub(super) fn describe(request: &wire::Request, body: Vec<u8>) -> Recorded {
    let target = request.header("x-amz-target").map(str::to_string);
    let scope_service = request.header("authorization").and_then(|auth| {
        // AWS4-HMAC-SHA256 Credential=AKID/20240101/us-east-1/sts/aws4_request, ...
        let cred = auth.split("Credential=").nth(1)?;
        let cred = cred.split([',', ' ']).next()?;
        cred.split('/').nth(3).map(str::to_string)
    });
    let (service, mut operation) = match target.as_deref().and_then(|t| t.rsplit_once('.')) {
        Some((prefix, op)) => (Some(prefix.to_string()), Some(op.to_string())),
        None => (scope_service, None),
    };
    if operation.is_none() {
        let is_form = request
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
        let mut params = if is_form {
            parse_form(&String::from_utf8_lossy(&body))
        } else {
            vec![]
        };
        if let Some((_, q)) = request.target.split_once('?') {
            params.extend(parse_form(q));
        }
        operation = params
            .into_iter()
            .find(|(k, _)| k == "Action")
            .map(|(_, v)| v);
    }
    Recorded {
        method: request.method.clone(),
        path: request.target.clone(),
        headers: request.headers.clone(),
        body,
        target,
        service,
        operation,
        injected: false,
    }
}

pub(super) fn take_fault(shared: &Shared, recorded: &Recorded) -> Option<Fault> {
    let mut faults = lock(&shared.faults);
    let i = faults.iter().position(|f| recorded.is(&f.op))?;
    if faults[i].skip > 0 {
        faults[i].skip -= 1;
        return None;
    }
    let fault = faults[i].clone();
    faults[i].remaining -= 1;
    if faults[i].remaining == 0 {
        faults.remove(i);
    }
    Some(fault)
}

/// True (and one fewer to lose) when `recorded`'s answer is to be lost.
pub(super) fn take_lost_answer(shared: &Shared, recorded: &Recorded) -> bool {
    let mut lost = lock(&shared.lost_answers);
    let Some(i) = lost.iter().position(|(op, _)| recorded.is(op)) else {
        return false;
    };
    lost[i].1 -= 1;
    if lost[i].1 == 0 {
        lost.remove(i);
    }
    true
}

/// Forwards the request (its write is committed upstream), then answers a retryable
/// `500 InternalServerError` in the request's protocol: the real answer is lost.
pub(super) fn lost_answer(
    upstream: &str,
    request: &wire::Request,
    recorded: &Recorded,
) -> io::Result<wire::Response> {
    let _committed = forward(upstream, request, &recorded.body)?;
    Ok(synthetic_error(
        recorded,
        &Fault {
            op: String::new(),
            skip: 0,
            remaining: 0,
            status: 500,
            code: "InternalServerError".into(),
            message: "Internal server error (fault-proxy: the answer was lost after the request was applied)".into(),
        },
    ))
}

pub(super) fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// The error answer the SDK expects for the request's protocol.
pub(super) fn synthetic_error(recorded: &Recorded, fault: &Fault) -> wire::Response {
    const REQUEST_ID: &str = "fault-proxy-0000-0000-0000-000000000000";
    let mut headers = vec![("x-amzn-RequestId".to_string(), REQUEST_ID.to_string())];
    let body = if recorded.target.is_some() {
        // awsJson1_0 / awsJson1_1: the SDK reads x-amzn-ErrorType, then __type and message.
        let content_type = recorded
            .header("content-type")
            .filter(|t| t.starts_with("application/x-amz-json"))
            .unwrap_or("application/x-amz-json-1.1")
            .to_string();
        headers.push(("Content-Type".into(), content_type));
        headers.push(("x-amzn-ErrorType".into(), fault.code.clone()));
        serde_json::json!({"__type": fault.code, "message": fault.message}).to_string()
    } else if recorded.form().contains_key("Action") || recorded.query().contains_key("Action") {
        // awsQuery (STS, classic SQS).
        headers.push(("Content-Type".into(), "text/xml".into()));
        let kind = if fault.status >= 500 {
            "Receiver"
        } else {
            "Sender"
        };
        format!(
            "<ErrorResponse><Error><Type>{kind}</Type><Code>{}</Code><Message>{}</Message></Error><RequestId>{REQUEST_ID}</RequestId></ErrorResponse>",
            xml_escape(&fault.code),
            xml_escape(&fault.message)
        )
    } else {
        // restXml (S3).
        headers.push(("Content-Type".into(), "application/xml".into()));
        headers.push(("x-amz-request-id".into(), REQUEST_ID.into()));
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{}</Code><Message>{}</Message><RequestId>{REQUEST_ID}</RequestId></Error>",
            xml_escape(&fault.code),
            xml_escape(&fault.message)
        )
    };
    wire::Response {
        status: fault.status,
        reason: wire::reason(fault.status).to_string(),
        headers,
        body: body.into_bytes(),
    }
}
