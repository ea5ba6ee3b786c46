//! The one scanner of Rego source that the static checks share ([`crate::vm`]'s rule
//! graph, [`crate::recursion`]'s call graph): the names in a text, outside string
//! literals (`"…"` with escapes, raw `` `…` ``) and `#` comments.

/// A (possibly dotted) name in Rego source: `data.p.f`, `input`, `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Name<'a> {
    /// The name as written, its segments joined by `.` (no trailing `.`).
    pub text: &'a str,
    /// Its byte offset in the scanned text.
    pub offset: usize,
    /// True when a `(` follows it (spaces and tabs allowed in between): a call.
    pub called: bool,
}

impl<'a> Name<'a> {
    /// Its segments (`data`, `p`, `f`).
    pub fn segments(&self) -> impl Iterator<Item = &'a str> {
        self.text.split('.').filter(|s| !s.is_empty())
    }
}

/// Every name in `text`, in order, outside strings and comments. Numbers (`1`, `2.5e3`)
/// are not names. Linear in the text's length.
pub(crate) fn names(text: &str) -> Vec<Name<'_>> {
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'"' || b == b'`' {
            // A string: to its closing quote; `\` escapes in `"…"` only.
            i += 1;
            while i < bytes.len() && bytes[i] != b {
                if b == b'"' && bytes[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
        } else if b == b'#' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if b.is_ascii_digit() {
            while i < bytes.len() && (word(bytes[i]) || bytes[i] == b'.') {
                i += 1;
            }
        } else if b.is_ascii_alphabetic() || b == b'_' {
            let start = i;
            while i < bytes.len() && (word(bytes[i]) || bytes[i] == b'.') {
                i += 1;
            }
            let mut j = i;
            while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'\t') {
                j += 1;
            }
            out.push(Name {
                text: text[start..i].trim_end_matches('.'),
                offset: start,
                called: bytes.get(j) == Some(&b'('),
            });
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn texts(text: &str) -> Vec<&str> {
        names(text).iter().map(|n| n.text).collect()
    }

    #[test]
    fn strings_comments_and_raw_strings_are_skipped() {
        assert_eq!(
            texts("x := data.p.y if { z } # w(1)\n\"v(\\\"q\\\")\" `u \\` k"),
            vec!["x", "data.p.y", "if", "z", "k"]
        );
        // A raw string has no escapes and may span lines; an unclosed string ends the text.
        assert_eq!(texts("`a\nb` c \"d"), vec!["c"]);
        assert_eq!(texts("a # \"b\nc"), vec!["a", "c"]);
    }

    #[test]
    fn calls_offsets_and_numbers() {
        let found = names("y := data.a.f(x); count (z) + 2.5e3 + g\t(1) + h.");
        let calls: Vec<(&str, usize)> = found
            .iter()
            .filter(|n| n.called)
            .map(|n| (n.text, n.offset))
            .collect();
        assert_eq!(calls, vec![("data.a.f", 5), ("count", 18), ("g", 38)]);
        assert_eq!(found.last().map(|n| n.text), Some("h"));
        assert_eq!(
            found[1].segments().collect::<Vec<_>>(),
            vec!["data", "a", "f"]
        );
    }

    proptest! {
        /// Whatever the text, the scan ends, each name is at its offset, and nothing
        /// inside a quoted string is a name.
        #[test]
        fn names_are_where_they_say_and_never_in_strings(
            text in "[a-z_. (#\"`\\\\\n0-9]{0,80}",
            quoted in "[a-z( ]{0,12}",
        ) {
            for n in names(&text) {
                prop_assert!(text[n.offset..].starts_with(n.text));
            }
            let wrapped = format!("\"{quoted}\" `{quoted}`");
            prop_assert!(names(&wrapped).is_empty());
        }
    }
}
