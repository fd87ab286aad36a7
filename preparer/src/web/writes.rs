//! The web dashboard's writes that a deployment's history records (approve, roll back), made
//! as the signed-in caller. The in-process Data API (the client's `DataApi` trait) writes as
//! `in-process`, since a trait call carries no caller; these call the same Data API methods
//! the gRPC edge and the in-process API call, with the caller's identity as the author, so
//! a person's approval or rollback on the page is recorded under their name as it would be
//! through the CLI. Their errors read as a remote caller's would.

use nephrite_preparer_client::DataError;

use crate::api::DataService;
use crate::errors::ApiError;

/// The error of `call` as a remote caller would read it.
fn refused(call: &'static str, error: ApiError) -> String {
    DataError::from_status(call, &tonic::Status::from(error)).to_string()
}

/// Approves deployment `id` as `author`.
pub(super) async fn approve(api: &DataService, id: &str, author: &str) -> Result<(), String> {
    api.approve_deployment(id, author)
        .await
        .map(drop)
        .map_err(|e| refused("ApproveDeployment", e))
}

/// Writes kept revision `number` of deployment `id` as its new package, as `author`.
pub(super) async fn rollback(
    api: &DataService,
    id: &str,
    number: i64,
    author: &str,
) -> Result<(), String> {
    api.rollback_deployment(id, number, author)
        .await
        .map(drop)
        .map_err(|e| refused("RollbackDeployment", e))
}
