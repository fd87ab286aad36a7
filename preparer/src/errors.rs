//! The daemon's error type and how each error becomes a gRPC status.

use nephrite_merge::{IdError, MergeError};
use tonic::{Code, Status};

use crate::store::StoreError;

/// Why a Data API call or a preparation step failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A store failure (not found, busy, lost lease, backend).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An invalid id or pattern.
    #[error("{what}: {source}")]
    BadId {
        /// Which argument.
        what: String,
        /// What is wrong.
        source: IdError,
    },
    /// A package that is not valid YAML / KRM.
    #[error("{what}: {message}")]
    BadPackage {
        /// Which package.
        what: String,
        /// The reader's message, with document and line.
        message: String,
    },
    /// A merge was refused.
    #[error("merging into {what}: {source}")]
    Merge {
        /// Into what.
        what: String,
        /// Why.
        source: Box<MergeError>,
    },
    /// Anything else the caller got wrong.
    #[error("{0}")]
    Invalid(String),
    /// The caller may not make this call this way (a plugin writing without its token).
    #[error("{0}")]
    Forbidden(String),
    /// One write of a batch was refused, so none was written.
    #[error("write {index} ({label}): {source}")]
    Item {
        /// The write's index in the batch.
        index: usize,
        /// What it does and to which deployment.
        label: String,
        /// Why (its status is this error's).
        source: Box<ApiError>,
    },
    /// The daemon broke its own promise (a store that created nothing).
    #[error("{0}")]
    Internal(String),
}

/// The status code of a store failure.
fn store_code(err: &StoreError) -> Code {
    match err {
        StoreError::NotFound { .. } => Code::NotFound,
        StoreError::Busy { .. } | StoreError::Changed { .. } => Code::Aborted,
        StoreError::LeaseLost { .. } | StoreError::Fenced { .. } => Code::FailedPrecondition,
        StoreError::Compacted { .. } => Code::OutOfRange,
        StoreError::Item { source, .. } => store_code(source),
        _ => Code::Internal,
    }
}

/// The status code of `err` (a batch's refused write: that write's).
fn code(err: &ApiError) -> Code {
    match err {
        ApiError::Store(store) => store_code(store),
        ApiError::Merge { source, .. } if source.is_not_ready() => Code::FailedPrecondition,
        ApiError::Forbidden(_) => Code::PermissionDenied,
        ApiError::Internal(_) => Code::Internal,
        ApiError::Item { source, .. } => code(source),
        ApiError::BadId { .. }
        | ApiError::BadPackage { .. }
        | ApiError::Merge { .. }
        | ApiError::Invalid(_) => Code::InvalidArgument,
    }
}

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Status {
        Status::new(code(&err), err.to_string())
    }
}

/// The longest id, pattern, metadata key or value a request may carry, in bytes.
pub const MAX_ID_BYTES: usize = 512;

/// The most patterns one field of a request may carry.
pub const MAX_PATTERNS: usize = 100;

/// INVALID_ARGUMENT unless `text` (the argument `what`) is at most [`MAX_ID_BYTES`] long. The
/// value itself is not echoed.
pub fn check_length(what: &str, text: &str) -> Result<(), ApiError> {
    if text.len() > MAX_ID_BYTES {
        return Err(ApiError::Invalid(format!(
            "{what}: {} bytes, longer than the limit of {MAX_ID_BYTES}",
            text.len()
        )));
    }
    Ok(())
}

/// INVALID_ARGUMENT when the field `what` carries more than [`MAX_PATTERNS`] patterns.
pub fn check_count(what: &str, count: usize) -> Result<(), ApiError> {
    if count > MAX_PATTERNS {
        return Err(ApiError::Invalid(format!(
            "{what}: {count} patterns, more than the limit of {MAX_PATTERNS} per request"
        )));
    }
    Ok(())
}

/// Checks an id argument (its length first: a megabyte id is refused before it is read).
pub fn check_id(what: &str, id: &str) -> Result<(), ApiError> {
    check_length(what, id)?;
    nephrite_merge::validate_id(id).map_err(|source| ApiError::BadId {
        what: what.to_owned(),
        source,
    })
}

/// Reads a YAML package argument of a request off the async runtime's threads (a blocking
/// task), so a large or hostile document never holds up other calls, health checks or
/// shutdown. The KRM reader's limits apply (a document over
/// [`nephrite_krm::DEFAULT_MAX_DOCUMENT_BYTES`] or nesting deeper than
/// [`nephrite_krm::DEFAULT_MAX_DEPTH`] is refused, in time linear in its size); the error
/// names `what` and the request `field`.
pub async fn parse_package(
    what: String,
    field: &'static str,
    yaml: String,
) -> Result<nephrite_krm::Package, ApiError> {
    let what = format!("{what} ({field})");
    tokio::task::spawn_blocking(move || read_package(&what, &yaml))
        .await
        .map_err(|e| ApiError::Invalid(format!("reading {field}: {e}")))?
}

/// Reads a YAML package argument (on the calling thread: see [`parse_package`] for requests).
pub fn read_package(what: &str, yaml: &str) -> Result<nephrite_krm::Package, ApiError> {
    nephrite_krm::Package::from_yaml(yaml).map_err(|e| ApiError::BadPackage {
        what: what.to_owned(),
        message: e.to_string(),
    })
}
