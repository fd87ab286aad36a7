//! What the test cluster's echo server answers and how it is told where to listen: pure
//! functions, so the binaries only do IO (`src/bin/echo.rs`, `src/bin/pause.rs`).

/// Where the echo server listens when nothing says otherwise.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:8080";

/// The longest request head read before answering 431.
pub const MAX_HEAD: usize = 16 * 1024;

/// The request line's path, from the head read so far, once its first line is complete.
///
/// `Ok(None)`: the first line is not complete yet. `Err`: the line is not
/// `METHOD SP PATH SP HTTP/x.y`, with what was wrong.
pub fn request_path(head: &[u8]) -> Result<Option<String>, String> {
    let Some(end) = head.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let line = std::str::from_utf8(&head[..end])
        .map_err(|_| "the request line is not UTF-8".to_owned())?;
    let mut parts = line.split(' ');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(method), Some(path), Some(version), None)
            if !method.is_empty() && path.starts_with('/') && version.starts_with("HTTP/1.") =>
        {
            Ok(Some(path.to_owned()))
        }
        _ => Err(format!("bad request line {line:?}")),
    }
}

/// The answer's body: the pod's name and the path, one line.
pub fn body(pod: &str, path: &str) -> String {
    format!("{pod} {path}\n")
}

/// A whole HTTP/1.1 response with `status` (e.g. `200 OK`) and a plain-text `body`; the
/// connection closes after it.
pub fn response(status: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// The pod's name: `POD_NAME` when set and not empty, else the host name.
pub fn pod_name(pod_name_env: Option<String>, hostname: impl FnOnce() -> Option<String>) -> String {
    pod_name_env
        .filter(|name| !name.is_empty())
        .or_else(hostname)
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The listen address: `--listen ADDR` (or `--listen=ADDR`) over `ECHO_LISTEN` over
/// [`DEFAULT_LISTEN`].
pub fn listen_address(args: &[String], env: Option<String>) -> Result<String, String> {
    match args {
        [] => Ok(env
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| DEFAULT_LISTEN.to_owned())),
        [flag, addr] if flag == "--listen" => Ok(addr.clone()),
        [flag] if flag.starts_with("--listen=") => Ok(flag["--listen=".len()..].to_owned()),
        other => Err(format!(
            "unexpected arguments {other:?} (usage: nephrite-echo [--listen ADDR])"
        )),
    }
}

#[cfg(test)]
mod tests;
