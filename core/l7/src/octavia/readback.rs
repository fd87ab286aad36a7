//! An observed listener read back as the model's [`Listener`], so the tree Octavia holds can be
//! evaluated with [`Listener::evaluate`] exactly like the translation it came from: policies in
//! position order, pools named by their names (the translation's pool ids).

use super::{PolicyAction, Tree};
use crate::model::{Action, Listener, ModelError, Policy};

impl Tree {
    /// The listener named `name` as a model listener (`None` when there is none); a request no
    /// policy matches gets `no_match_status` when it has no default pool. Policies whose pool
    /// is not on the tree are refused as Octavia would never hold them.
    pub fn listener_model(
        &self,
        name: &str,
        no_match_status: u16,
    ) -> Option<Result<Listener, ModelError>> {
        let observed = self.listeners.iter().find(|l| l.name == name)?;
        let pool_name = |id: &String| {
            self.pools
                .iter()
                .find(|p| &p.id == id)
                .map(|p| p.name.clone())
                .unwrap_or_else(|| id.clone())
        };
        let mut listener = Listener::new(no_match_status);
        listener.default_pool = observed.default_pool.as_ref().map(pool_name);
        for policy in &observed.policies {
            let action = match &policy.action {
                PolicyAction::Reject => Action::Reject,
                PolicyAction::RedirectToUrl { url, code } => Action::RedirectToUrl {
                    url: url.clone(),
                    code: *code,
                },
                PolicyAction::RedirectPrefix { prefix, code } => Action::RedirectPrefix {
                    prefix: prefix.clone(),
                    code: *code,
                },
                PolicyAction::RedirectToPool(id) => Action::RedirectToPool {
                    pool: pool_name(id),
                },
            };
            let rules = policy.rules.iter().map(|r| r.rule.clone()).collect();
            if let Err(e) =
                listener.insert_policy(Policy::new(policy.name.clone(), action, rules), None)
            {
                return Some(Err(e));
            }
        }
        Some(Ok(listener))
    }
}
