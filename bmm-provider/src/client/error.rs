//! How the client classifies what the API answered.
//!
//! | answer                        | error                  | the caller should          |
//! |-------------------------------|------------------------|----------------------------|
//! | 429, 502, 503, 504, timeout   | [`ApiError::Transient`]| retry with backoff (done)  |
//! | connection refused / reset    | [`ApiError::Transport`]| retry with backoff (done)  |
//! | 404                           | [`ApiError::NotFound`] | treat as gone              |
//! | 400                           | [`ApiError::Rejected`] | stop; show the API message |
//! | 401, 403                      | [`ApiError::Auth`]     | stop until credentials change |
//! | 409                           | [`ApiError::Conflict`] | look the object up, adopt  |
//! | anything else                 | [`ApiError::Unexpected`] | stop; report            |

use super::types::ApiErrorBody;

/// An API call that did not succeed. Every variant names the operation (`POST vpc`, …).
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A temporary failure that survived the retries.
    #[error("{op}: the API answered {status} ({message}), still after retries")]
    Transient {
        /// The operation.
        op: String,
        /// HTTP status (0 for a timeout).
        status: u16,
        /// The API's message.
        message: String,
    },
    /// The object does not exist.
    #[error("{op}: not found")]
    NotFound {
        /// The operation.
        op: String,
    },
    /// The API refused the request as invalid.
    #[error("{op}: the API refused the request: {message}")]
    Rejected {
        /// The operation.
        op: String,
        /// The API's message.
        message: String,
        /// The API's details.
        data: Option<serde_json::Value>,
    },
    /// The token is missing, invalid, expired or lacks the role.
    #[error("{op}: not authorised ({status}): {message}")]
    Auth {
        /// The operation.
        op: String,
        /// 401 or 403.
        status: u16,
        /// The API's message.
        message: String,
    },
    /// An object of that name exists.
    #[error("{op}: an object of that name exists: {message}")]
    Conflict {
        /// The operation.
        op: String,
        /// The API's message.
        message: String,
        /// The existing object's id, when the API gave it (`data.id`).
        existing_id: Option<String>,
    },
    /// The API could not be reached.
    #[error("{op}: could not reach the API: {source}")]
    Transport {
        /// The operation.
        op: String,
        /// The cause.
        #[source]
        source: reqwest::Error,
    },
    /// The answer could not be read.
    #[error("{op}: unreadable answer: {message}")]
    Decode {
        /// The operation.
        op: String,
        /// What was wrong.
        message: String,
    },
    /// A status the client does not expect for this operation.
    #[error("{op}: unexpected answer {status}: {body}")]
    Unexpected {
        /// The operation.
        op: String,
        /// HTTP status.
        status: u16,
        /// The body, shortened.
        body: String,
    },
    /// The endpoint or org is not usable.
    #[error("invalid client configuration: {0}")]
    Config(String),
}

impl ApiError {
    /// Builds the error for a non-success answer.
    pub fn from_answer(op: &str, status: u16, body: &str) -> ApiError {
        let parsed: Option<ApiErrorBody> = serde_json::from_str(body).ok();
        let message = parsed
            .as_ref()
            .map(|b| b.message.clone())
            .unwrap_or_else(|| body.chars().take(200).collect());
        let op = op.to_string();
        match status {
            404 => ApiError::NotFound { op },
            400 | 422 => ApiError::Rejected {
                op,
                message,
                data: parsed.and_then(|b| b.data),
            },
            401 | 403 => ApiError::Auth {
                op,
                status,
                message,
            },
            409 => {
                let existing_id = parsed
                    .and_then(|b| b.data)
                    .and_then(|d| d.get("id").and_then(|i| i.as_str()).map(str::to_string));
                ApiError::Conflict {
                    op,
                    message,
                    existing_id,
                }
            }
            429 | 502 | 503 | 504 => ApiError::Transient {
                op,
                status,
                message,
            },
            _ => ApiError::Unexpected {
                op,
                status,
                body: body.chars().take(200).collect(),
            },
        }
    }

    /// Whether a retry may succeed without any change (429/502/503/504, timeouts, connection
    /// failures).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ApiError::Transient { .. } | ApiError::Transport { .. }
        )
    }

    /// Whether the object is gone (404).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ApiError::NotFound { .. })
    }
}
