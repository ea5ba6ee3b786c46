//! The opaque page cursor of `list_jobs`, the same for every store: the hex of
//! `v1:<last job id>`.

/// Encodes the cursor that continues after `last_id`.
pub(crate) fn encode_cursor(last_id: &str) -> String {
    format!("v1:{last_id}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Decodes a cursor to the last job id it names; `None` if it is not one of ours.
pub(crate) fn decode_cursor(cursor: &str) -> Option<String> {
    if !cursor.len().is_multiple_of(2) || cursor.len() > 200 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(cursor.get(i..i + 2)?, 16).ok())
        .collect();
    let text = String::from_utf8(bytes?).ok()?;
    let id = text.strip_prefix("v1:")?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric())).then(|| id.to_string())
}
