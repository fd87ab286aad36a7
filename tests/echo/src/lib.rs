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

/// The listen addresses: every `--listen ADDR` (or `--listen=ADDR`) over `ECHO_LISTEN` over
/// [`DEFAULT_LISTEN`]. Each value may name several addresses separated by commas, so one pod can
/// serve several ports (the NetworkPolicy tests' pods answer on 80 and 81).
pub fn listen_addresses(args: &[String], env: Option<String>) -> Result<Vec<String>, String> {
    let split = |value: &str| -> Vec<String> {
        value
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let mut addresses = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--listen" {
            let value = rest.next().ok_or_else(|| {
                "--listen needs an address (usage: nephrite-echo [--listen ADDR[,ADDR...]]...)"
                    .to_owned()
            })?;
            addresses.extend(split(value));
        } else if let Some(value) = arg.strip_prefix("--listen=") {
            addresses.extend(split(value));
        } else {
            return Err(format!(
                "unexpected argument {arg:?} (usage: nephrite-echo [--listen ADDR[,ADDR...]]...)"
            ));
        }
    }
    if addresses.is_empty() && !args.is_empty() {
        return Err("--listen names no address".to_owned());
    }
    if addresses.is_empty() {
        addresses = env.as_deref().map(split).unwrap_or_default();
    }
    if addresses.is_empty() {
        addresses.push(DEFAULT_LISTEN.to_owned());
    }
    Ok(addresses)
}

#[cfg(test)]
mod tests;
