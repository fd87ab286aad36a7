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

#[cfg(test)]
mod tests {
    use nephrite_krm::Package;

    use super::super::{
        Call, Desired, HTTP_LISTENER, HTTPS_LISTENER, ListenerProtocol, ListenerTls, Ownership,
        minimal_calls, plan,
    };
    use super::*;
    use crate::{Outcome, Request, SourceObject, translate};

    const OBJECTS: &str = "\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: shop}
spec:
  defaultBackend: {service: {name: web, port: {number: 80}}}
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /cart, pathType: Prefix, backend: {service: {name: cart, port: {number: 80}}}}
      - {path: /cart/checkout, pathType: Exact, backend: {service: {name: web, port: {number: 80}}}}
  - host: '*.example.org'
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: cart, port: {number: 80}}}}
---
apiVersion: route.openshift.io/v1
kind: Route
metadata: {name: api, namespace: shop}
spec: {host: api.example.com, path: /v1, to: {kind: Service, name: web}}
";

    /// The translation of the objects in `yaml`.
    fn translate_yaml(yaml: &str) -> crate::Translation {
        let objects: Vec<SourceObject> = Package::from_yaml(yaml)
            .unwrap()
            .into_objects()
            .into_iter()
            .map(|object| SourceObject {
                object,
                origin: "test".into(),
            })
            .collect();
        translate(&objects, &Default::default())
    }

    fn outcome(listener: &Listener, host: &str, path: &str) -> String {
        let headers: Vec<(String, String)> = Vec::new();
        let request = Request {
            host,
            path,
            target: path,
            headers: &headers,
            client_cert: None,
        };
        match listener.evaluate(&request) {
            Outcome::Pool(pool) => format!("pool {pool}"),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn the_tree_a_plan_builds_routes_like_the_translation() {
        let translation = translate_yaml(OBJECTS);
        let owner = Ownership::new("c");
        let mut tree = Tree::default();
        let calls = plan(&Desired::from_config(&translation.config), &tree, &owner).unwrap();
        let mut next = 0;
        tree.apply_all(&calls, &mut || {
            next += 1;
            format!("id-{next}")
        })
        .unwrap();
        let http = &translation.config.http;
        let read_back = tree
            .listener_model(HTTP_LISTENER, http.no_match_status)
            .unwrap()
            .unwrap();
        for (host, path) in [
            ("shop.example.com", "/"),
            ("shop.example.com", "/cart"),
            ("shop.example.com", "/cart/"),
            ("shop.example.com", "/cartoon"),
            ("shop.example.com", "/cart/checkout"),
            ("shop.example.com", "/cart/checkout/x"),
            ("a.example.org", "/x"),
            ("a.b.example.org", "/x"),
            ("api.example.com", "/v1/users"),
            ("api.example.com", "/v2"),
            ("other.test", "/"),
        ] {
            assert_eq!(
                outcome(&read_back, host, path),
                outcome(http, host, path),
                "{host}{path}"
            );
        }
        assert!(tree.listener_model("nope", 404).is_none());
    }

    const TLS_OBJECTS: &str = "\
apiVersion: v1
kind: Secret
metadata: {name: tls, namespace: shop}
type: kubernetes.io/tls
stringData: {tls.crt: CERT, tls.key: KEY}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: shop}
spec:
  tls: [{hosts: [shop.example.com], secretName: tls}]
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /cart, pathType: Prefix, backend: {service: {name: cart, port: {number: 80}}}}
";

    #[test]
    fn certificates_in_barbican_make_a_tls_listener_and_a_rotation_is_one_update() {
        let translation = translate_yaml(TLS_OBJECTS);
        assert_eq!(translation.config.certificates.len(), 1, "{translation:#?}");
        let owner = Ownership::new("c");
        let stored = |reference: &'static str| {
            move |_: &crate::model::Certificate| Some(reference.to_owned())
        };

        // Not stored: no TLS listener.
        let http_only = Desired::from_config_with_tls(&translation.config, |_| None);
        assert_eq!(http_only, Desired::from_config(&translation.config));
        assert_eq!(http_only.listeners.len(), 1);

        // Stored: a TERMINATED_HTTPS listener on 443 routing like the HTTPS listener.
        let first = Desired::from_config_with_tls(&translation.config, stored("ref-1"));
        let mut tree = Tree::default();
        let calls = plan(&first, &tree, &owner).unwrap();
        assert_eq!(calls.len(), minimal_calls(&first, &tree, &owner));
        let mut next = 0;
        let mut ids = || {
            next += 1;
            format!("id-{next}")
        };
        tree.apply_all(&calls, &mut ids).unwrap();
        let tls = tree
            .listeners
            .iter()
            .find(|l| l.name == HTTPS_LISTENER)
            .expect("a TLS listener");
        assert_eq!(
            (tls.protocol, tls.port),
            (ListenerProtocol::TerminatedHttps, 443)
        );
        assert_eq!(
            tls.tls,
            Some(ListenerTls {
                default_container: "ref-1".into(),
                sni_containers: vec!["ref-1".into()],
            })
        );
        let https = &translation.config.https;
        let read_back = tree
            .listener_model(HTTPS_LISTENER, https.no_match_status)
            .unwrap()
            .unwrap();
        for (host, path) in [
            ("shop.example.com", "/cart/x"),
            ("shop.example.com", "/"),
            ("other.test", "/cart"),
        ] {
            assert_eq!(outcome(&read_back, host, path), outcome(https, host, path));
        }
        assert_eq!(
            outcome(https, "shop.example.com", "/cart/x"),
            "pool shop/cart:80"
        );
        assert!(plan(&first, &tree, &owner).unwrap().is_empty());

        // Rotation: one listener update naming the new container, nothing else.
        let rotated = Desired::from_config_with_tls(&translation.config, stored("ref-2"));
        let calls = plan(&rotated, &tree, &owner).unwrap();
        assert_eq!(calls.len(), 1, "{calls:#?}");
        assert_eq!(minimal_calls(&rotated, &tree, &owner), 1);
        let Call::UpdateListener { tls: Some(new), .. } = &calls[0] else {
            panic!("{calls:#?}");
        };
        assert_eq!(new.default_container, "ref-2");
        let request = calls[0].request("lb", &[]).unwrap();
        let body = request.body.unwrap();
        assert_eq!(body["listener"]["default_tls_container_ref"], "ref-2");
        assert_eq!(body["listener"]["sni_container_refs"][0], "ref-2");
        tree.apply_all(&calls, &mut ids).unwrap();
        assert!(plan(&rotated, &tree, &owner).unwrap().is_empty());

        // No certificate any more: the TLS listener goes.
        let calls = plan(&http_only, &tree, &owner).unwrap();
        assert!(
            calls
                .iter()
                .any(|c| matches!(c, Call::DeleteListener { .. })),
            "{calls:#?}"
        );
    }
}
