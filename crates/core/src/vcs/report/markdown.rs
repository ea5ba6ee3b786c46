//! Safe Markdown out of hostile text.
//!
//! Everything a plan carries (addresses, diffs, error messages, policy messages) is
//! written by the pull request's author. These helpers keep it in its place: escaped
//! inline text can never open a link, an HTML tag, a heading or a table cell, nor mention
//! anyone; a diff goes in a fenced block no line of it can close; and every cut falls
//! between whole characters and whole escapes.

/// What `@` becomes: `@` and a zero-width space, as an entity, so that `@name` in hostile
/// text never mentions (and so notifies) anyone. The same escape Dependabot uses.
const AT: &str = "@&#8203;";
/// What a cut text ends with.
pub(crate) const ELLIPSIS: &str = "…";
/// The longest link destination kept; a longer URL is shown without its link.
const URL_MAX_BYTES: usize = 512;

/// True for the characters that reorder text on screen (bidirectional overrides and
/// isolates), which could make an address read as something else.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
}

/// Pushes one character of hostile text, escaped for inline Markdown, onto `out`.
fn push_inline(c: char, out: &mut String) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '@' => out.push_str(AT),
        '\\' | '`' | '*' | '_' | '{' | '}' | '[' | ']' | '(' | ')' | '#' | '+' | '-' | '.'
        | '!' | '|' | '~' | '$' | '"' | '\'' | ':' | '=' | '^' => {
            out.push('\\');
            out.push(c);
        }
        c if c.is_control() => out.push(' '),
        c if is_bidi_control(c) => out.push('\u{FFFD}'),
        c => out.push(c),
    }
}

/// Pushes one character of hostile text, escaped for raw HTML, onto `out`: every ASCII
/// punctuation character that means something to HTML or to Markdown as a numeric entity.
fn push_html(c: char, out: &mut String) {
    match c {
        '@' => out.push_str(AT),
        '&' | '<' | '>' | '"' | '\'' | '\\' | '`' | '*' | '_' | '{' | '}' | '[' | ']' | '('
        | ')' | '#' | '+' | '!' | '|' | '~' | '$' | '=' | '^' => {
            out.push_str(&format!("&#{};", u32::from(c)));
        }
        c if c.is_control() => out.push(' '),
        c if is_bidi_control(c) => out.push('\u{FFFD}'),
        c => out.push(c),
    }
}

/// `text` escaped character by character with `push`, at most `max` bytes: when the whole
/// does not fit, as many whole escaped characters as fit with [`ELLIPSIS`] after them (or
/// nothing, when not even the ellipsis fits). Never splits a character or an escape.
fn escape_with(text: &str, max: usize, push: fn(char, &mut String)) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    let mut piece = String::new();
    for (i, c) in text.char_indices() {
        piece.clear();
        push(c, &mut piece);
        if out.len() + piece.len() > max {
            // Too long: start again, leaving room for the ellipsis.
            let room = max.saturating_sub(ELLIPSIS.len());
            let mut cut = String::with_capacity(max);
            for c in text[..i].chars() {
                piece.clear();
                push(c, &mut piece);
                if cut.len() + piece.len() > room {
                    break;
                }
                cut.push_str(&piece);
            }
            if max >= ELLIPSIS.len() {
                cut.push_str(ELLIPSIS);
            }
            return cut;
        }
        out.push_str(&piece);
    }
    out
}

/// Hostile text as inline Markdown that renders as exactly that text: Markdown's
/// punctuation backslash-escaped, `&`, `<` and `>` as entities (so no HTML, no `</details>`,
/// no entity of the author's), `@` followed by a zero-width space (so nobody is mentioned),
/// and line breaks and other control characters as spaces (so it stays on its line, and in
/// its table cell).
pub fn escape(text: &str) -> String {
    escape_with(text, usize::MAX, push_inline)
}

/// [`escape`]d text of at most `max` bytes: when the whole does not fit, as many whole
/// escaped characters as fit with `…` after them. Never splits a character or an
/// escape.
pub fn escape_within(text: &str, max: usize) -> String {
    escape_with(text, max, push_inline)
}

/// Hostile text for inside raw HTML (such as `<summary>`), where Markdown is not read: `@`
/// unmentionable, control characters as spaces, and every ASCII punctuation character that
/// means something to HTML or to Markdown as a numeric entity (`&#60;` for `<`), which reads
/// as the character itself whether or not Markdown looks at it. At most `max` bytes, cut
/// between whole characters and entities, with [`ELLIPSIS`].
pub fn escape_html_within(text: &str, max: usize) -> String {
    escape_with(text, max, push_html)
}

/// The longest run of backticks in `text`.
pub fn longest_backtick_run(text: &str) -> usize {
    let (mut longest, mut run) = (0, 0);
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// Plan text made safe inside a fenced code block: line ends as `\n`, and the characters
/// that are not text (NUL and other control characters but tab) as U+FFFD.
pub fn code_text(text: &str) -> String {
    text.replace("\r\n", "\n")
        .chars()
        .map(|c| match c {
            '\r' => '\n',
            '\n' | '\t' => c,
            c if c.is_control() || is_bidi_control(c) => '\u{FFFD}',
            c => c,
        })
        .collect()
}

/// The fence for a code block holding `text` (already [`code_text`]): backticks, one more
/// than the longest run inside and at least three, so no line of `text` can close it.
pub fn fence_for(text: &str) -> String {
    fence_over(longest_backtick_run(text))
}

/// The fence for text whose longest backtick run is `run`.
pub fn fence_over(run: usize) -> String {
    "`".repeat((run + 1).max(3))
}

/// Text as an inline code span that shows it as is: on one line, between backtick runs
/// longer than any inside (padded with a space where it starts or ends with a backtick);
/// empty or blank text is one space, `` ` ` ``.
/// Not for table cells (a `|` would still split the cell).
pub fn code_span(text: &str) -> String {
    let text: String = text
        .chars()
        .map(|c| {
            if c.is_control() || is_bidi_control(c) {
                ' '
            } else {
                c
            }
        })
        .collect();
    if text.trim().is_empty() {
        // An empty span would be a bare backtick run that pairs with a later one.
        return "` `".to_string();
    }
    let ticks = "`".repeat(longest_backtick_run(&text) + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{text}{pad}{ticks}")
}

/// A Markdown link to `url` with `label` (already safe Markdown), or the label alone when
/// the URL is not `https://` or `http://`, or is longer than 512 bytes once encoded. Every character of
/// the URL outside a small safe set is percent-encoded, so it cannot end the link early.
pub fn link(label: &str, url: Option<&str>) -> String {
    match url.and_then(safe_url) {
        Some(url) => format!("[{label}]({url})"),
        None => label.to_string(),
    }
}

/// `url` percent-encoded for a link destination, when it is an `http(s)` URL short enough.
fn safe_url(url: &str) -> Option<String> {
    let lower = url
        .get(..8)
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    if !(lower.starts_with("https://") || lower.starts_with("http://")) {
        return None;
    }
    let mut out = String::with_capacity(url.len());
    for byte in url.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~:/?#=&%+,;".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
        if out.len() > URL_MAX_BYTES {
            return None;
        }
    }
    Some(out)
}

/// The longest prefix of `text` of at most `max` bytes that ends on a line end (whole
/// lines only), for a last guard on text made of self-contained lines.
pub fn whole_lines_within(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let cut = crate::limits::prefix_within_bytes(text, max);
    match cut.rfind('\n') {
        Some(i) => &cut[..=i],
        None => "",
    }
}
