//! Minimal HTTP/1.1 message reading and writing, shared with [`crate::runtime`].

use super::*;

/// Header names and values, in order.
pub type Headers = Vec<(String, String)>;

/// A parsed request head.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
}

impl Request {
    pub fn parse(head: &str) -> io::Result<Request> {
        let mut lines = head.split("\r\n");
        let start = lines.next().unwrap_or_default();
        let mut parts = start.split(' ');
        let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
            return Err(bad(format!("bad request line `{start}`")));
        };
        Ok(Request {
            method: method.to_string(),
            target: target.to_string(),
            headers: parse_headers(lines),
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

/// A response to write (or one read from upstream).
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

pub fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn parse_headers<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<(String, String)> {
    lines
        .filter(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// Parses a status line and headers.
pub fn parse_status(head: &str) -> io::Result<(u16, String, Headers)> {
    let mut lines = head.split("\r\n");
    let start = lines.next().unwrap_or_default();
    let mut parts = start.splitn(3, ' ');
    let _version = parts.next();
    let status = parts
        .next()
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| bad(format!("bad status line `{start}`")))?;
    let reason = parts.next().unwrap_or_default().to_string();
    Ok((status, reason, parse_headers(lines)))
}

/// Reads up to and including the blank line; `None` on EOF before any byte.
pub fn read_head<R: BufRead>(reader: &mut R) -> io::Result<Option<String>> {
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            if head.is_empty() {
                return Ok(None);
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed inside the message head",
            ));
        }
        if head.is_empty() && (line == b"\r\n" || line == b"\n") {
            continue; // tolerate stray blank lines between messages
        }
        if line == b"\r\n" || line == b"\n" {
            break;
        }
        head.extend_from_slice(&line);
        if head.len() > 1 << 20 {
            return Err(bad("message head over 1 MiB"));
        }
    }
    let text = String::from_utf8_lossy(&head).replace("\r\n", "\n");
    Ok(Some(text.trim_end().replace('\n', "\r\n")))
}

/// Reads a body framed by `Transfer-Encoding: chunked` or `Content-Length`;
/// without either, reads to EOF when `until_eof` (responses) or nothing (requests).
pub fn read_body<R: BufRead>(
    reader: &mut R,
    headers: &[(String, String)],
    until_eof: bool,
) -> io::Result<Vec<u8>> {
    let chunked = header(headers, "transfer-encoding")
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    if chunked {
        return read_chunked(reader);
    }
    if let Some(len) = header(headers, "content-length") {
        let len: usize = len
            .trim()
            .parse()
            .map_err(|_| bad(format!("bad Content-Length `{len}`")))?;
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        return Ok(body);
    }
    let mut body = Vec::new();
    if until_eof {
        reader.read_to_end(&mut body)?;
    }
    Ok(body)
}

fn read_chunked<R: BufRead>(reader: &mut R) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "chunked body cut short",
            ));
        }
        let size = line.trim().split(';').next().unwrap_or_default();
        let size = usize::from_str_radix(size.trim(), 16)
            .map_err(|_| bad(format!("bad chunk size `{}`", line.trim())))?;
        if size == 0 {
            // Trailers, then the blank line.
            loop {
                let mut trailer = String::new();
                if reader.read_line(&mut trailer)? == 0 || trailer.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = [0u8; 2];
        reader.read_exact(&mut crlf)?;
    }
}

/// Writes a response with `Content-Length` and `Connection: close`,
/// dropping any framing headers of the original. For a HEAD answer the
/// original `Content-Length` is kept and no body is written.
pub fn write_response<W: Write>(out: &mut W, r: &Response, is_head: bool) -> io::Result<()> {
    let mut buf = Vec::with_capacity(256 + r.body.len());
    let reason = if r.reason.is_empty() {
        reason(r.status)
    } else {
        &r.reason
    };
    write!(buf, "HTTP/1.1 {} {}\r\n", r.status, reason)?;
    for (name, value) in &r.headers {
        let framing = ["connection", "transfer-encoding", "keep-alive"];
        if framing.iter().any(|s| name.eq_ignore_ascii_case(s))
            || (!is_head && name.eq_ignore_ascii_case("content-length"))
        {
            continue;
        }
        write!(buf, "{name}: {value}\r\n")?;
    }
    if !is_head {
        write!(buf, "Content-Length: {}\r\n", r.body.len())?;
    }
    buf.extend_from_slice(b"Connection: close\r\n\r\n");
    if !is_head {
        buf.extend_from_slice(&r.body);
    }
    out.write_all(&buf)
}

/// The standard reason phrase of the statuses the doubles use.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}
