//! Just enough HTTP/1.x for a scrape: find the end of the request head, route
//! its request line, write a complete `Connection: close` response.

/// Content type of the Prometheus text exposition format.
pub const EXPOSITION: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET` or `HEAD` of `/metrics`.
    Metrics {
        /// `HEAD`: headers only.
        head_only: bool,
    },
    /// Another path.
    NotFound,
    /// Another method.
    MethodNotAllowed,
    /// The head is too long.
    TooLarge,
    /// Not an HTTP/1 request line.
    BadRequest,
}

impl Route {
    /// Status and text of an error answer.
    pub fn error(self) -> (u16, &'static str) {
        match self {
            Route::Metrics { .. } => (200, ""),
            Route::NotFound => (404, "not found; metrics are at /metrics\n"),
            Route::MethodNotAllowed => (405, "only GET and HEAD are served\n"),
            Route::TooLarge => (431, "request head too large\n"),
            Route::BadRequest => (400, "bad request\n"),
        }
    }
}

/// Length of the request head (up to the blank line), once it is all there.
/// Bare `\n` line ends are accepted too, as RFC 9112 allows.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = buf.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Route a request by its first line; headers are not needed.
pub fn route(head: &[u8]) -> Route {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let Ok(line) = std::str::from_utf8(line) else {
        return Route::BadRequest;
    };
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Route::BadRequest;
    };
    if !version.starts_with("HTTP/1.") {
        return Route::BadRequest;
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Route::MethodNotAllowed,
    };
    let path = target.split('?').next().unwrap_or_default();
    if path == "/metrics" {
        Route::Metrics { head_only }
    } else {
        Route::NotFound
    }
}

/// A whole response: status line, headers, and the body unless `head_only`.
pub fn response(status: u16, content_type: &str, body: &[u8], head_only: bool) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if status == 405 {
        out.push_str("Allow: GET, HEAD\r\n");
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    if !head_only {
        out.extend_from_slice(body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let table: &[(&str, Route)] = &[
            ("GET /metrics HTTP/1.1", Route::Metrics { head_only: false }),
            ("HEAD /metrics HTTP/1.0", Route::Metrics { head_only: true }),
            (
                "GET /metrics?name[]=x HTTP/1.1",
                Route::Metrics { head_only: false },
            ),
            ("GET /metrics/ HTTP/1.1", Route::NotFound),
            ("GET / HTTP/1.1", Route::NotFound),
            ("PUT /metrics HTTP/1.1", Route::MethodNotAllowed),
            ("GET /metrics", Route::BadRequest),
            ("GET /metrics HTTP/2", Route::BadRequest),
            ("GET  /metrics HTTP/1.1", Route::BadRequest),
            ("", Route::BadRequest),
        ];
        for (line, want) in table {
            let head = format!("{line}\r\nHost: x");
            assert_eq!(route(head.as_bytes()), *want, "{line:?}");
        }
        assert_eq!(route(&[0xff, b' ', b'/', b' ']), Route::BadRequest);
    }

    #[test]
    fn head_ends_at_the_first_blank_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r\nbody"), Some(20));
        assert_eq!(head_end(b"GET / HTTP/1.1\nA: b\n\n"), Some(19));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n"), None);
    }

    #[test]
    fn responses_are_complete() {
        let r = String::from_utf8(response(200, EXPOSITION, b"x 1\n", false)).unwrap();
        assert_eq!(
            r,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
             Content-Length: 4\r\nConnection: close\r\n\r\nx 1\n"
        );
        let r = String::from_utf8(response(405, "text/plain", b"no", true)).unwrap();
        assert!(
            r.contains("Allow: GET, HEAD\r\n") && r.ends_with("\r\n\r\n"),
            "{r}"
        );
    }
}
