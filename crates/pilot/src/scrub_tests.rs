use super::*;
use proptest::prelude::*;

/// The reference replacement, written independently of [`Patterns::scan`]: at each byte,
/// the longest secret that starts there becomes the marker.
fn reference(input: &[u8], secrets: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < input.len() {
        let best = secrets
            .iter()
            .filter(|s| !s.is_empty() && input[i..].starts_with(s))
            .map(Vec::len)
            .max();
        match best {
            Some(len) => {
                out.extend_from_slice(MARKER.as_bytes());
                i += len;
            }
            None => {
                out.push(input[i]);
                i += 1;
            }
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// The pieces of `out` between markers (the input's own bytes, never made by a marker).
fn pieces(out: &[u8]) -> Vec<Vec<u8>> {
    let text = String::from_utf8(out.to_vec()).unwrap();
    text.split(MARKER).map(|p| p.as_bytes().to_vec()).collect()
}

/// Streams `input` cut at `cuts` through a scrubber; what it let out, and the most bytes
/// it held back after any write.
fn stream(patterns: &Patterns, input: &[u8], cuts: &[usize]) -> (Vec<u8>, usize) {
    let mut scrubber = StreamScrubber::new();
    let mut out = Vec::new();
    let mut held = 0;
    let mut at = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    cuts.sort_unstable();
    for cut in cuts.into_iter().chain([input.len()]) {
        out.extend(scrubber.push(patterns, &input[at..cut]));
        held = held.max(scrubber.held());
        at = cut;
    }
    out.extend(scrubber.finish(patterns));
    (out, held)
}

/// Secrets over `ab` (so they overlap and share prefixes), 1 to 12 bytes; the text over
/// `abc` with secrets spliced in. No `(`: the text never holds the marker itself.
fn case() -> impl Strategy<Value = (Vec<Vec<u8>>, Vec<u8>, Vec<usize>)> {
    let secret = proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b')], 1..=12);
    proptest::collection::vec(secret, 1..=4).prop_flat_map(|mut secrets| {
        // A prefix of the first secret, as a secret of its own: overlapping prefixes.
        let first = secrets[0].clone();
        if first.len() > 1 {
            secrets.push(first[..first.len() / 2 + 1].to_vec());
        }
        let n = secrets.len();
        let piece = prop_oneof![
            proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'c')], 0..8)
                .prop_map(Some),
            (0..n).prop_map(|_| None),
        ];
        let pieces = proptest::collection::vec((piece, 0..n), 0..24);
        let cuts = proptest::collection::vec(any::<usize>(), 0..12);
        (Just(secrets), pieces, cuts).prop_map(|(secrets, pieces, cuts)| {
            let mut input = Vec::new();
            for (piece, which) in pieces {
                match piece {
                    Some(text) => input.extend(text),
                    None => input.extend(&secrets[which]),
                }
            }
            (secrets, input, cuts)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// A stream cut anywhere, any number of times, lets out exactly the whole input with
    /// every secret replaced, never a secret, and never holds more than the longest − 1.
    #[test]
    fn a_stream_cut_anywhere_lets_out_the_scrubbed_input_and_no_secret((secrets, input, cuts) in case()) {
        let values: Vec<String> = secrets.iter().map(|s| String::from_utf8(s.clone()).unwrap()).collect();
        let patterns = Patterns::new(values.iter().map(String::as_str));
        let (out, held) = stream(&patterns, &input, &cuts);
        prop_assert_eq!(&out, &reference(&input, &secrets));
        prop_assert_eq!(&out, &patterns.scrub(&input));
        let longest = secrets.iter().map(Vec::len).max().unwrap();
        prop_assert!(held < longest, "held {} bytes, longest secret {}", held, longest);
        for piece in pieces(&out) {
            for secret in &secrets {
                prop_assert!(!contains(&piece, secret), "{:?} let out in {:?}", secret, out);
            }
        }
    }

    /// Every byte boundary of a secret, one byte per write: still caught.
    #[test]
    fn one_byte_writes_still_catch_every_secret(secret in "[a-z0-9!-]{1,24}", before in "[A-Z ]{0,10}", after in "[A-Z ]{0,10}") {
        let patterns = Patterns::new([secret.as_str()]);
        let input = format!("{before}{secret}{after}\n{secret}");
        let cuts: Vec<usize> = (0..input.len()).collect();
        let (out, _) = stream(&patterns, input.as_bytes(), &cuts);
        prop_assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{before}{MARKER}{after}\n{MARKER}")
        );
    }
}

#[test]
fn the_longest_secret_wins_where_two_start_at_the_same_byte() {
    let patterns = Patterns::new(["abc", "abcdef", "cde"]);
    assert_eq!(
        patterns.scrub_str("xabcdefy abcdx cdex"),
        format!("x{MARKER}y {MARKER}dx {MARKER}x")
    );
    // A shorter match is held while a longer one may still come.
    let mut s = StreamScrubber::new();
    assert_eq!(s.push(&patterns, b"xabc"), b"x");
    assert_eq!(s.held(), 3);
    assert_eq!(s.push(&patterns, b"de"), b"");
    assert_eq!(s.push(&patterns, b"f!"), format!("{MARKER}!").into_bytes());
    assert_eq!(s.push(&patterns, b"abc"), b"");
    assert_eq!(s.finish(&patterns), MARKER.as_bytes());
}

#[test]
fn no_secret_lets_everything_out_at_once() {
    let patterns = Patterns::default();
    let mut s = StreamScrubber::new();
    assert_eq!(s.push(&patterns, b"plain"), b"plain");
    assert_eq!(s.held(), 0);
    assert_eq!(s.finish(&patterns), b"");
}

#[test]
fn a_value_is_also_caught_in_its_escaped_forms() {
    let value = "p\"w\\<&>\n\t${x}%{y}";
    let patterns = Patterns::new([value]);
    for shown in [
        // Terraform's -json output (Go's encoding/json).
        serde_json::json!({ "v": value }).to_string(),
        r#"{"v":"p\"w\\\u003c\u0026\u003e\n\t${x}%{y}"}"#.to_string(),
        // The plan's rendering (strconv.Quote, template sequences doubled).
        r#"+ input = "p\"w\\<&>\n\t$${x}%%{y}""#.to_string(),
        // The raw value.
        format!("value: {value}"),
    ] {
        let out = patterns.scrub_str(&shown);
        assert!(out.contains(MARKER), "{shown} -> {out}");
        assert!(!out.contains("p\\\"w"), "{shown} -> {out}");
        assert!(!out.contains("p\"w"), "{shown} -> {out}");
    }
}

#[test]
fn a_multi_line_value_is_caught_line_by_line_as_a_heredoc_shows_it() {
    let value = "-----BEGIN KEY-----\nMIIEvQIBADANBgkq\r\nab\n-----END KEY-----";
    let patterns = Patterns::new([value]);
    let heredoc =
        "  + input = <<-EOT\n        -----BEGIN KEY-----\n        MIIEvQIBADANBgkq\n        ab\n        -----END KEY-----\n    EOT\n";
    let out = patterns.scrub_str(heredoc);
    assert!(!out.contains("MIIEvQIBADANBgkq"), "{out}");
    assert!(!out.contains("BEGIN KEY"), "{out}");
    // A line shorter than SHORT_VALUE_CHARS is not a pattern of its own.
    assert!(out.contains("        ab\n"), "{out}");
}

#[test]
fn short_values_are_scrubbed_too_and_empty_ones_are_not_secrets() {
    let patterns = Patterns::new(["", "7"]);
    assert_eq!(
        patterns.scrub_str("1 7 17"),
        format!("1 {MARKER} 1{MARKER}")
    );
    assert!(forms("").is_empty());
    assert!(Patterns::new([""]).is_empty());
}

#[test]
fn the_marker_does_not_tell_the_length() {
    let short = Patterns::new(["abcd"]).scrub_str("[abcd]");
    let long = Patterns::new(["abcdefghijklmnopqrstuvwxyz0123456789"])
        .scrub_str("[abcdefghijklmnopqrstuvwxyz0123456789]");
    assert_eq!(short, long);
}

#[test]
fn the_process_set_is_shared_and_grows() {
    let secrets = Secrets::new();
    let other = secrets.clone();
    assert_eq!(secrets.scrub_str("token-x"), "token-x");
    other.add(["token-x"]);
    assert_eq!(secrets.scrub_str("a token-x"), format!("a {MARKER}"));
    assert!(!format!("{secrets:?}").contains("token-x"));
}
