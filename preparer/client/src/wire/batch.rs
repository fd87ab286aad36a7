//! The batch write (`ApplyDeployments`) on the wire: its writes, results and fence, both ways.

use nephrite_proto::nephrite::preparer::data::v1 as pb;
use pb::deployment_write::Write;
use pb::deployment_write_result::Result as Outcome;

use crate::{Created, DeploymentInfo, DeploymentWrite, LeaseFence, WireError, WriteResult};

impl From<DeploymentWrite> for pb::DeploymentWrite {
    fn from(write: DeploymentWrite) -> Self {
        let write = match write {
            DeploymentWrite::Create(request) => Write::Create(request.into()),
            DeploymentWrite::Update {
                id,
                package_yaml,
                if_updated,
            } => Write::Update(pb::UpdateDeploymentWrite {
                deployment_id: id,
                package_yaml,
                if_updated: if_updated.unwrap_or_default(),
            }),
            DeploymentWrite::Delete { id } => Write::Delete(pb::DeleteRequest { id }),
        };
        pb::DeploymentWrite { write: Some(write) }
    }
}

impl TryFrom<pb::DeploymentWrite> for DeploymentWrite {
    type Error = WireError;

    fn try_from(write: pb::DeploymentWrite) -> Result<Self, WireError> {
        Ok(match write.write {
            Some(Write::Create(request)) => DeploymentWrite::Create(request.into()),
            Some(Write::Update(update)) => DeploymentWrite::Update {
                id: update.deployment_id,
                package_yaml: update.package_yaml,
                if_updated: (!update.if_updated.is_empty()).then_some(update.if_updated),
            },
            Some(Write::Delete(delete)) => DeploymentWrite::Delete { id: delete.id },
            None => {
                return Err(WireError::Missing {
                    field: "DeploymentWrite.write",
                });
            }
        })
    }
}

impl From<WriteResult> for pb::DeploymentWriteResult {
    fn from(result: WriteResult) -> Self {
        let result = match result {
            WriteResult::Created(created) => Outcome::Created(created.into()),
            WriteResult::Updated(info) => Outcome::Updated(info.into()),
            WriteResult::Deleted(deleted) => Outcome::Deleted(pb::DeleteResponse { deleted }),
        };
        pb::DeploymentWriteResult {
            result: Some(result),
        }
    }
}

impl TryFrom<pb::DeploymentWriteResult> for WriteResult {
    type Error = WireError;

    fn try_from(result: pb::DeploymentWriteResult) -> Result<Self, WireError> {
        Ok(match result.result {
            Some(Outcome::Created(created)) => WriteResult::Created(Created::from(created)),
            Some(Outcome::Updated(info)) => WriteResult::Updated(DeploymentInfo::from(info)),
            Some(Outcome::Deleted(deleted)) => WriteResult::Deleted(deleted.deleted),
            None => {
                return Err(WireError::Missing {
                    field: "DeploymentWriteResult.result",
                });
            }
        })
    }
}

impl From<LeaseFence> for pb::LeaseFence {
    fn from(fence: LeaseFence) -> Self {
        pb::LeaseFence {
            name: fence.name,
            transitions: fence.transitions,
        }
    }
}

impl From<pb::LeaseFence> for LeaseFence {
    fn from(fence: pb::LeaseFence) -> Self {
        LeaseFence {
            name: fence.name,
            transitions: fence.transitions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeploymentRequest;

    #[test]
    fn writes_and_results_cross_the_wire_unchanged() {
        let writes = [
            DeploymentWrite::Create(DeploymentRequest {
                parent_id: "p".into(),
                instance_key: "k".into(),
                ..DeploymentRequest::default()
            }),
            DeploymentWrite::Update {
                id: "a".into(),
                package_yaml: "x: 1\n".into(),
                if_updated: Some("2026-12-08T00:00:00Z".into()),
            },
            DeploymentWrite::Update {
                id: "a".into(),
                package_yaml: String::new(),
                if_updated: None,
            },
            DeploymentWrite::Delete { id: "b".into() },
        ];
        for write in writes {
            let back = DeploymentWrite::try_from(pb::DeploymentWrite::from(write.clone()));
            assert_eq!(back, Ok(write));
        }
        let results = [
            WriteResult::Created(Created {
                created: true,
                deployment_id: "c".into(),
            }),
            WriteResult::Updated(DeploymentInfo {
                id: "u".into(),
                ..DeploymentInfo::default()
            }),
            WriteResult::Deleted(false),
        ];
        for result in results {
            let back = WriteResult::try_from(pb::DeploymentWriteResult::from(result.clone()));
            assert_eq!(back, Ok(result));
        }
    }

    #[test]
    fn an_empty_write_or_result_names_its_field() {
        let write = DeploymentWrite::try_from(pb::DeploymentWrite { write: None });
        assert_eq!(
            write.unwrap_err().to_string(),
            "DeploymentWrite.write is missing"
        );
        let result = WriteResult::try_from(pb::DeploymentWriteResult { result: None });
        assert!(result.unwrap_err().to_string().contains("result"));
    }
}
