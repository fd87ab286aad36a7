//! Why a Data API call failed, in the API's own terms: the preparer refused it (with a kind a
//! caller can branch on: not found, busy, lease lost, …), it never reached the preparer, or
//! the preparer's answer did not convert to domain values.

use std::fmt;

/// The kinds of refusal the Data API gives (gRPC's codes, as the API uses them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// No such template, site, plugin or deployment.
    NotFound,
    /// The entry exists.
    AlreadyExists,
    /// A bad id, pattern, package or argument.
    InvalidArgument,
    /// A lost or unknown modification lease, or a merge whose source is not ready.
    FailedPrecondition,
    /// Another writer holds the deployment: read again and retry.
    Aborted,
    /// A `Watch` from a compacted revision.
    OutOfRange,
    /// The caller's role does not allow the call.
    PermissionDenied,
    /// The caller presented no usable credentials.
    Unauthenticated,
    /// The server is out of a resource (a watcher dropped for not reading).
    ResourceExhausted,
    /// The server could not be reached or is going away.
    Unavailable,
    /// The call took too long.
    DeadlineExceeded,
    /// The call was cancelled.
    Cancelled,
    /// The server failed (a store backend error).
    Internal,
    /// Any other code.
    Other,
}

impl ErrorKind {
    /// The kind of a gRPC code.
    pub fn of_code(code: tonic::Code) -> Self {
        use tonic::Code;
        match code {
            Code::NotFound => ErrorKind::NotFound,
            Code::AlreadyExists => ErrorKind::AlreadyExists,
            Code::InvalidArgument => ErrorKind::InvalidArgument,
            Code::FailedPrecondition => ErrorKind::FailedPrecondition,
            Code::Aborted => ErrorKind::Aborted,
            Code::OutOfRange => ErrorKind::OutOfRange,
            Code::PermissionDenied => ErrorKind::PermissionDenied,
            Code::Unauthenticated => ErrorKind::Unauthenticated,
            Code::ResourceExhausted => ErrorKind::ResourceExhausted,
            Code::Unavailable => ErrorKind::Unavailable,
            Code::DeadlineExceeded => ErrorKind::DeadlineExceeded,
            Code::Cancelled => ErrorKind::Cancelled,
            Code::Internal => ErrorKind::Internal,
            _ => ErrorKind::Other,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// An answer of the preparer that does not convert to the domain's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// A field the API always sets was absent.
    #[error("{field} is missing")]
    Missing {
        /// The message and field, e.g. `Deployment.info`.
        field: &'static str,
    },
    /// An enum field held a value this client does not know.
    #[error("{field} holds the unknown value {value}")]
    UnknownValue {
        /// The message and field, e.g. `Change.kind`.
        field: &'static str,
        /// The number received.
        value: i32,
    },
    /// A listing's revision header (`nephrite-revision`) held no decimal revision.
    #[error("header {header} holds {value:?}, not a revision")]
    BadRevisionHeader {
        /// The header's name.
        header: &'static str,
        /// What it held (lossy when not text).
        value: String,
    },
}

/// Why a Data API call failed. Its text is what a person needs: the preparer's own message
/// for a refusal, the transport's causes for a call that never arrived.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DataError {
    /// The preparer answered with an error.
    #[error("{message}")]
    Refused {
        /// The call, e.g. `GetDeployment`.
        call: &'static str,
        /// What kind of refusal.
        kind: ErrorKind,
        /// The preparer's message (it names the id or argument).
        message: String,
    },
    /// The call never reached the preparer (connection refused, TLS handshake ended, …).
    #[error("{message}")]
    Unreachable {
        /// The call.
        call: &'static str,
        /// The status message followed by its causes.
        message: String,
    },
    /// The preparer's answer does not convert to domain values.
    #[error("{call}: the preparer's answer is invalid: {source}")]
    InvalidAnswer {
        /// The call.
        call: &'static str,
        /// What was wrong with it.
        source: WireError,
    },
}

impl DataError {
    /// The error of `call` answered with `status`: a refusal, or, when the status carries a
    /// transport cause, an unreachable preparer whose message lists the causes.
    pub fn from_status(call: &'static str, status: &tonic::Status) -> Self {
        let message = status.message();
        match std::error::Error::source(status).map(nephrite_runtime::report::error_chain) {
            Some(causes) => DataError::Unreachable {
                call,
                message: if causes.starts_with(message) {
                    causes
                } else {
                    format!("{message}: {causes}")
                },
            },
            None => DataError::Refused {
                call,
                kind: ErrorKind::of_code(status.code()),
                message: message.to_owned(),
            },
        }
    }

    /// The call that failed.
    pub fn call(&self) -> &'static str {
        match self {
            DataError::Refused { call, .. }
            | DataError::Unreachable { call, .. }
            | DataError::InvalidAnswer { call, .. } => call,
        }
    }

    /// The kind of failure: a refusal's kind, [`ErrorKind::Unavailable`] for an unreachable
    /// preparer, [`ErrorKind::Internal`] for an invalid answer.
    pub fn kind(&self) -> ErrorKind {
        match self {
            DataError::Refused { kind, .. } => *kind,
            DataError::Unreachable { .. } => ErrorKind::Unavailable,
            DataError::InvalidAnswer { .. } => ErrorKind::Internal,
        }
    }

    /// Whether the entry asked for does not exist.
    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }

    /// Whether another writer held the deployment (retrying after a fresh read may succeed).
    pub fn is_busy(&self) -> bool {
        self.kind() == ErrorKind::Aborted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_keeps_the_preparers_message_and_its_kind() {
        let error = DataError::from_status(
            "GetDeployment",
            &tonic::Status::not_found("deployment not found: d1"),
        );
        assert_eq!(error.to_string(), "deployment not found: d1");
        assert!(error.is_not_found());
        assert_eq!(error.call(), "GetDeployment");
    }

    #[test]
    fn an_unknown_code_is_other() {
        assert_eq!(ErrorKind::of_code(tonic::Code::DataLoss), ErrorKind::Other);
        assert_eq!(ErrorKind::of_code(tonic::Code::Aborted), ErrorKind::Aborted);
    }

    #[test]
    fn an_invalid_answer_names_the_call_and_the_field() {
        let error = DataError::InvalidAnswer {
            call: "Watch",
            source: WireError::UnknownValue {
                field: "Change.kind",
                value: 9,
            },
        };
        assert_eq!(
            error.to_string(),
            "Watch: the preparer's answer is invalid: Change.kind holds the unknown value 9"
        );
    }
}
