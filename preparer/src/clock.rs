//! The daemon's one clock read: now as RFC 3339 text and as unix milliseconds.

/// Now, RFC 3339 (UTC).
pub fn now_text() -> String {
    jiff::Timestamp::now().to_string()
}

/// Now, unix milliseconds.
pub fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Unix milliseconds as RFC 3339 text (empty when out of range).
pub fn ms_text(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_default()
}
