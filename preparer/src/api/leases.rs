//! Named leases of the Data API: acquire, renew, release and get, for the leader election of
//! a controller's replicas (ntc's TKO backend). The store decides on its own clock; this
//! layer checks the arguments, makes the tokens and turns the store's answers into the
//! client crate's [`Lease`].

use std::time::Duration;

use nephrite_preparer_client::Lease;
use tonic::Status;

use super::DataService;
use crate::clock::ms_text;
use crate::errors::{ApiError, check_id, check_length};
use crate::store::{LeaseRecord, StoreError};

/// A named lease's length when the caller asks for none.
pub const DEFAULT_NAMED_LEASE: Duration = Duration::from_secs(15);

/// The longest named lease: an hour.
const LONGEST_MS: i64 = 3_600_000;

fn duration_ms(requested: Option<Duration>) -> i64 {
    requested
        .unwrap_or(DEFAULT_NAMED_LEASE)
        .as_millis()
        .clamp(1, LONGEST_MS as u128) as i64
}

fn lease(record: LeaseRecord, with_token: bool) -> Lease {
    Lease {
        name: record.name,
        holder: record.holder,
        token: if with_token {
            record.token
        } else {
            String::new()
        },
        transitions: u64::try_from(record.transitions).unwrap_or(0),
        expires: ms_text(record.expires_ms),
        remaining: Duration::from_millis(
            u64::try_from(record.expires_ms - record.now_ms).unwrap_or(0),
        ),
    }
}

fn check_token(token: &str) -> Result<(), ApiError> {
    check_length("lease token", token)?;
    if token.is_empty() {
        return Err(ApiError::Invalid("lease token: empty".to_owned()));
    }
    Ok(())
}

/// The status of a lease call's error: another holder is ABORTED (busy, as a held
/// deployment is), a token that no longer holds the lease FAILED_PRECONDITION (as a lost
/// modification is); every other error as the Data API maps it.
pub fn status(error: ApiError) -> Status {
    match error {
        ApiError::Store(held @ StoreError::LeaseHeld { .. }) => Status::aborted(held.to_string()),
        ApiError::Store(lost @ StoreError::LeaseNotHeld { .. }) => {
            Status::failed_precondition(lost.to_string())
        }
        other => Status::from(other),
    }
}

impl DataService {
    /// Takes the named lease `name` for `holder` for `duration` (`None`:
    /// [`DEFAULT_NAMED_LEASE`]; at most an hour).
    pub async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        duration: Option<Duration>,
    ) -> Result<Lease, ApiError> {
        check_id("lease name", name)?;
        check_length("lease holder", holder)?;
        if holder.is_empty() {
            return Err(ApiError::Invalid(format!(
                "lease {name}: the holder is empty"
            )));
        }
        let token = uuid::Uuid::new_v4().to_string();
        let record = self
            .store
            .acquire_lease(name, holder, &token, duration_ms(duration))
            .await?;
        if record.token == token {
            self.changes.bump();
        }
        Ok(lease(record, true))
    }

    /// Extends the named lease `token` holds by `duration` from now.
    pub async fn renew_lease(
        &self,
        name: &str,
        token: &str,
        duration: Option<Duration>,
    ) -> Result<Lease, ApiError> {
        check_id("lease name", name)?;
        check_token(token)?;
        let record = self
            .store
            .renew_lease(name, token, duration_ms(duration))
            .await?;
        Ok(lease(record, true))
    }

    /// Frees the named lease `token` holds.
    pub async fn release_lease(&self, name: &str, token: &str) -> Result<(), ApiError> {
        check_id("lease name", name)?;
        check_token(token)?;
        self.store.release_lease(name, token).await?;
        self.changes.bump();
        Ok(())
    }

    /// The named lease as it is, without its token.
    pub async fn get_lease(&self, name: &str) -> Result<Lease, ApiError> {
        check_id("lease name", name)?;
        Ok(lease(self.store.get_lease(name).await?, false))
    }
}
