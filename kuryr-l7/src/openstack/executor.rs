//! Carrying out a plan (`nephrite_l7::octavia::plan`) against Octavia: one call at a time,
//! each through [`Octavia::execute`] (a 409 "immutable" waited out, the load balancer `ACTIVE`
//! again before the next call).
//!
//! A call that fails does not stop the others: the calls that name what it would have created
//! are skipped (they cannot be sent), every other call still runs, so one Ingress whose pool
//! Octavia refuses does not hold up the rest. What failed is reported with the Kubernetes object
//! it was for (from the tags of the object the call creates or changes), for a Warning Event
//! and a retry with backoff; the next plan, made from what Octavia then holds, picks up exactly
//! what is missing.
//!
//! [`execute_onto`] also performs every accepted call on a copy of the tree
//! ([`Tree::apply`], with the ids from Octavia's answers), so the driver knows what Octavia holds
//! after a sync without reading the tree back, and the next sync plans from it without reading
//! it first.

use nephrite_l7::octavia::{ApplyError, Call, Method, OBJECT_TAG, Tree, answer_key};
use serde_json::Value;

use super::ApiError;
use super::octavia::Octavia;

/// A call that failed.
#[derive(Debug)]
pub struct Failure {
    /// The call's index in the plan.
    pub index: usize,
    /// The Kubernetes object it was for (the origin in its tags, `Ingress shop/web …`), when
    /// known.
    pub object: Option<String>,
    /// What went wrong.
    pub error: ApiError,
}

/// What running a plan did.
#[derive(Debug, Default)]
pub struct Executed {
    /// Calls Octavia accepted.
    pub done: usize,
    /// Calls not sent because a call they depend on failed.
    pub skipped: usize,
    /// Calls that failed.
    pub failures: Vec<Failure>,
}

impl Executed {
    /// Whether every call succeeded.
    pub fn is_complete(&self) -> bool {
        self.failures.is_empty() && self.skipped == 0
    }
}

/// The Kubernetes object named by an object tag among `tags`.
pub fn object_of_tags(tags: &[String]) -> Option<String> {
    tags.iter()
        .find_map(|t| t.strip_prefix(OBJECT_TAG))
        .map(str::to_owned)
}

/// The Kubernetes object `call` works for: the tags it sets, or those of the object it changes
/// in `tree`.
pub fn object_of(call: &Call, tree: &Tree) -> Option<String> {
    let policy_tags = |id: &str| {
        tree.listeners
            .iter()
            .flat_map(|l| &l.policies)
            .find(|p| p.id == id)
            .and_then(|p| object_of_tags(&p.tags))
    };
    let pool_tags = |id: &str| {
        tree.pools
            .iter()
            .find(|p| p.id == id)
            .and_then(|p| object_of_tags(&p.tags))
    };
    match call {
        Call::CreatePool { tags, .. }
        | Call::CreateMember { tags, .. }
        | Call::CreateListener { tags, .. }
        | Call::CreatePolicy { tags, .. }
        | Call::CreateRule { tags, .. } => object_of_tags(tags),
        Call::DeletePool { pool }
        | Call::UpdateMember { pool, .. }
        | Call::DeleteMember { pool, .. } => pool_tags(pool),
        Call::UpdatePolicy { policy, .. }
        | Call::DeletePolicy { policy }
        | Call::UpdateRule { policy, .. }
        | Call::DeleteRule { policy, .. } => policy_tags(policy),
        Call::UpdateListener { .. } | Call::DeleteListener { .. } => None,
    }
}

/// Runs `plan` on load balancer `lb_id`, `tree` being what it was made from (for naming the
/// objects of failed calls).
pub async fn execute(octavia: &Octavia, lb_id: &str, plan: &[Call], tree: &Tree) -> Executed {
    run(octavia, lb_id, plan, tree, None).await
}

/// Runs `plan` as [`execute`] does, `kept` being the tree it was made from, and performs each
/// call Octavia accepted on `kept`. Returns what ran and whether `kept` is now what Octavia
/// holds: true only when every call was accepted and performed with the id Octavia answered (a
/// failed call may leave Octavia half way, and a delete answered 404 means someone else changed
/// the tree: the caller reads it again).
pub async fn execute_onto(
    octavia: &Octavia,
    lb_id: &str,
    plan: &[Call],
    kept: &mut Tree,
) -> (Executed, bool) {
    let before = kept.clone();
    let mut exact = true;
    let executed = run(octavia, lb_id, plan, &before, Some((kept, &mut exact))).await;
    let exact = exact && executed.is_complete();
    (executed, exact)
}

/// [`execute`], performing each accepted call on the tree of `onto` too (its flag cleared when
/// that tree may no longer be what Octavia holds).
async fn run(
    octavia: &Octavia,
    lb_id: &str,
    plan: &[Call],
    tree: &Tree,
    mut onto: Option<(&mut Tree, &mut bool)>,
) -> Executed {
    let mut created: Vec<Option<String>> = Vec::with_capacity(plan.len());
    let mut executed = Executed::default();
    for (index, call) in plan.iter().enumerate() {
        let request = match call.request(lb_id, &created) {
            Ok(request) => request,
            Err(ApplyError::Dangling(_)) => {
                executed.skipped += 1;
                created.push(None);
                continue;
            }
            Err(other) => {
                // `request` refuses only dangling references; anything else is a planner bug
                // worth saying as such rather than hiding.
                tracing::error!(index, ?call, "plan call has no request: {other}");
                executed.skipped += 1;
                created.push(None);
                continue;
            }
        };
        let method = match request.method {
            Method::Post => reqwest::Method::POST,
            Method::Put => reqwest::Method::PUT,
            Method::Delete => reqwest::Method::DELETE,
        };
        tracing::debug!(%method, path = %request.path, "octavia call");
        match octavia
            .execute(lb_id, method, &request.path, request.body.as_ref())
            .await
        {
            Ok(answer) => {
                executed.done += 1;
                let id = answer_key(call).and_then(|key| {
                    answer
                        .get(key)
                        .and_then(|o| o.get("id"))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                });
                if let Some((kept, exact)) = onto.as_mut() {
                    let answered = id.clone().unwrap_or_default();
                    let missing_id = answer_key(call).is_some() && id.is_none();
                    if missing_id
                        || kept
                            .apply(call, &created, &mut || answered.clone())
                            .is_err()
                    {
                        **exact = false;
                    }
                }
                created.push(id);
            }
            Err(error) if error.is_not_found() && matches!(request.method, Method::Delete) => {
                // Gone already (deleted by hand, or with its parent): what the call wanted.
                executed.done += 1;
                if let Some((_, exact)) = onto.as_mut() {
                    **exact = false;
                }
                created.push(None);
            }
            Err(error) => {
                tracing::warn!(index, object = ?object_of(call, tree), "{error}");
                executed.failures.push(Failure {
                    index,
                    object: object_of(call, tree),
                    error,
                });
                created.push(None);
            }
        }
    }
    executed
}

#[cfg(test)]
mod tests {
    use super::*;
    use nephrite_l7::octavia::{PoolProtocol, Ref};

    #[test]
    fn a_call_names_its_object_by_its_own_tags_or_its_parents() {
        let tags = vec![
            "kuryr-l7-cluster:c".to_owned(),
            "kuryr-l7-object:Ingress shop/web".to_owned(),
        ];
        let create = Call::CreatePool {
            name: "shop/web:80".to_owned(),
            protocol: PoolProtocol::Http,
            tags: tags.clone(),
        };
        let tree = Tree::default();
        assert_eq!(
            object_of(&create, &tree).as_deref(),
            Some("Ingress shop/web")
        );
        let member = Call::CreateMember {
            pool: Ref::Created(0),
            address: "10.0.0.1:80".parse().unwrap(),
            weight: 1,
            tags: vec![],
        };
        assert_eq!(object_of(&member, &tree), None);
    }
}
