use nephrite_l7::{Member, Policy};

use super::*;

fn settings() -> RenderSettings {
    RenderSettings {
        listen: "127.0.0.1:8080".parse().unwrap(),
        stats_socket: "/run/l7/haproxy.sock".into(),
        files_dir: "/run/l7".into(),
    }
}

fn pool(id: &str, weights: &[u32]) -> Pool {
    Pool {
        id: id.into(),
        members: weights
            .iter()
            .enumerate()
            .map(|(i, w)| Member {
                address: format!("10.0.0.{}:80", i + 1).parse().unwrap(),
                weight: *w,
            })
            .collect(),
        ..Pool::default()
    }
}

fn config() -> L7Config {
    let mut config = L7Config::default();
    for p in [pool("shop/web:80", &[1, 3]), pool("shop/api:80", &[])] {
        config.pools.insert(p.id.clone(), p);
    }
    let host = Rule::new(RuleType::HostName, CompareType::EqualTo, "shop.example.com");
    let policies = [
        Policy::new(
            "to-pool",
            Action::RedirectToPool {
                pool: "shop/web:80".into(),
            },
            vec![
                host.clone(),
                Rule::new(RuleType::Path, CompareType::Regex, "(?s)^/it's(?:/.*)?$"),
            ],
        ),
        Policy::new(
            "redirect",
            Action::RedirectPrefix {
                prefix: "https://shop.example.com".into(),
                code: 301,
            },
            vec![host.clone()],
        ),
        Policy::new(
            "reject",
            Action::Reject,
            vec![
                Rule::new(RuleType::Header, CompareType::Contains, "bot")
                    .with_key("User-Agent")
                    .inverted(),
            ],
        ),
    ];
    for policy in policies {
        config.http.insert_policy(policy, None).unwrap();
    }
    config
}

#[test]
fn reject_comes_before_redirects_before_pools_as_on_octavia() {
    let text = render(&config(), &settings());
    let deny = text.find("http-request deny if !policy_3_rule_0").unwrap();
    let redirect = text
        .find("redirect prefix 'https://shop.example.com' code 301 if policy_2_rule_0")
        .unwrap();
    let pool = text
        .find("use_backend pool_1 if policy_1_rule_0 policy_1_rule_1")
        .unwrap();
    assert!(deny < redirect && redirect < pool, "{text}");
    assert!(
        text.contains("acl policy_1_rule_0 req.hdr(host),field(1,:) -i -m str 'shop.example.com'")
    );
    assert!(text.contains(r"acl policy_1_rule_1 path -m reg '(?s)^/it'\''s(?:/.*)?$'"));
    assert!(text.contains("acl policy_3_rule_0 req.hdr(User-Agent) -m sub 'bot'"));
    assert!(text.contains("default_backend no_match"));
    assert!(text.contains("backend no_match\n    http-request return status 404"));
}

#[test]
fn pools_become_backends_with_weights_and_empty_pools_answer_503() {
    let text = render(&config(), &settings());
    // Pools by id order: shop/api:80 is pool_0, shop/web:80 is pool_1.
    assert!(text.contains("backend pool_0\n    # shop/api:80"));
    assert!(text.contains("backend pool_1\n    # shop/web:80"));
    assert!(text.contains("server member_1 10.0.0.2:80 weight 3"));
    let api = &text[text.find("\nbackend pool_0").unwrap()..text.find("\nbackend pool_1").unwrap()];
    assert!(api.contains("http-request return status 503"), "{api}");
}

#[test]
fn weights_over_256_are_scaled_keeping_ratios_and_non_zero_weights() {
    assert_eq!(weights(&pool("p", &[1000, 500, 1, 0])), [256, 128, 1, 0]);
    assert_eq!(weights(&pool("p", &[3, 1])), [3, 1]);
}

#[test]
fn rendering_is_deterministic_and_master_worker_with_exposed_listeners() {
    let a = render(&config(), &settings());
    assert_eq!(a, render(&config(), &settings()));
    assert!(a.contains("    master-worker\n"));
    assert!(
        a.contains("stats socket '/run/l7/haproxy.sock' mode 600 level admin expose-fd listeners")
    );
}
