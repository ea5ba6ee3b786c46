//! Job bodies: POST `/v1/environments/{environment}/-/jobs` reads the document
//! and calls `JobRequest::from_value`; `JobRequest::parse` is the same on text.
//! A valid request must survive the round trip through its own JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sortie_core::job::is_relative_safe_path;
use sortie_core::JobRequest;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = JobRequest::parse(text);
    if let Some(doc) = sortie_fuzz::document(data) {
        assert_eq!(JobRequest::from_value(&doc), parsed, "parse and from_value differ");
    }
    let request = match parsed {
        Ok(r) => r,
        Err(e) => return sortie_fuzz::check_error(&e),
    };
    assert!(request.files.keys().all(|p| is_relative_safe_path(p)));
    let served = serde_json::to_value(&request).expect("a request serialises");
    let back = JobRequest::from_value(&served)
        .unwrap_or_else(|e| panic!("a valid request's own JSON is refused: {e}\n{served}"));
    assert_eq!(back, request, "a request changed through its own JSON");
});
