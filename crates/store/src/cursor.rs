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

/// Encodes the cursor of a sweeper list that continues after the gsi3 sort key `sk`
/// (`<time>#<id>`): the hex of `g3:<sk>`.
pub(crate) fn encode_gsi3_cursor(sk: &str) -> String {
    format!("g3:{sk}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Decodes a sweeper list's cursor to the gsi3 sort key and the job id it names; `None` if
/// it is not one of ours.
pub(crate) fn decode_gsi3_cursor(cursor: &str) -> Option<(String, String)> {
    if !cursor.len().is_multiple_of(2) || cursor.len() > 300 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(cursor.get(i..i + 2)?, 16).ok())
        .collect();
    let text = String::from_utf8(bytes?).ok()?;
    let sk = text.strip_prefix("g3:")?;
    let (_, id) = sk.rsplit_once('#')?;
    let fine = !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_alphanumeric())
        && sk.bytes().all(|b| b.is_ascii_graphic());
    fine.then(|| (sk.to_string(), id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gsi3_cursor_names_its_sort_key_and_job_and_refuses_others() {
        let sk = "2025-01-02T03:04:05.123+00:00#01jnx6v4k2m8q9r3s5t7w0y1za";
        let c = encode_gsi3_cursor(sk);
        assert_eq!(
            decode_gsi3_cursor(&c),
            Some((sk.to_string(), "01jnx6v4k2m8q9r3s5t7w0y1za".to_string()))
        );
        assert_eq!(decode_gsi3_cursor(&encode_cursor("abc")), None);
        assert_eq!(decode_gsi3_cursor(&encode_gsi3_cursor("no-id#")), None);
        assert_eq!(decode_gsi3_cursor("zz"), None);
    }
}
