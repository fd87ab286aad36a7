//! What a person asks of the Data API from either dashboard — a deployment's package, an
//! approval, a deletion — and the one place those calls are made.

use nephrite_preparer_client::DataError;

use super::Connector;

/// What the caller should ask the Data API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Fetch a deployment's package.
    Package(String),
    /// Approve a deployment.
    Approve(String),
    /// Delete a deployment.
    Delete(String),
}

/// The answer to a [`Request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A deployment's package YAML, or why it could not be had.
    Package(String, Result<String, String>),
    /// Approved / deleted, or the server's refusal.
    Done(Request, Result<(), String>),
}

/// Runs `request` against a Data API from `connect`.
pub async fn perform(connect: &Connector, request: Request) -> Outcome {
    let client = match connect().await {
        Ok(client) => client,
        Err(err) => return failed(request, err),
    };
    let message = |error: DataError| error.to_string();
    match request {
        Request::Package(id) => {
            let package = client
                .get_deployment(&id)
                .await
                .map(|deployment| deployment.package_yaml)
                .map_err(message);
            Outcome::Package(id, package)
        }
        Request::Approve(ref id) => {
            let result = client
                .approve_deployment(id)
                .await
                .map(|_| ())
                .map_err(message);
            Outcome::Done(request, result)
        }
        Request::Delete(ref id) => {
            let result = client
                .delete_deployment(id)
                .await
                .map(|_| ())
                .map_err(message);
            Outcome::Done(request, result)
        }
    }
}

fn failed(request: Request, err: String) -> Outcome {
    match request {
        Request::Package(id) => Outcome::Package(id, Err(err)),
        other => Outcome::Done(other, Err(err)),
    }
}
