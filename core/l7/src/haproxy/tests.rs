use proptest::prelude::*;

use super::*;
use crate::model::{Member, Policy};

fn settings() -> RenderSettings {
    RenderSettings {
        listen: "127.0.0.1:8080".parse().unwrap(),
        listen_tls: None,
        stats_socket: "/run/l7/haproxy.sock".into(),
        files_dir: "/run/l7".into(),
        default_certificate: None,
    }
}

fn tls_settings(default: bool) -> RenderSettings {
    RenderSettings {
        listen_tls: Some("127.0.0.1:8443".parse().unwrap()),
        default_certificate: default.then(|| certificate(&[], "DEFAULT")),
        ..settings()
    }
}

fn certificate(hosts: &[&str], tag: &str) -> Certificate {
    Certificate {
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        cert_pem: format!("-----BEGIN CERTIFICATE-----\n{tag}\n-----END CERTIFICATE-----\n"),
        key_pem: format!("-----BEGIN PRIVATE KEY-----\n{tag}-KEY\n-----END PRIVATE KEY-----"),
        origin: format!("Secret shop/{tag}"),
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

fn tls_config() -> L7Config {
    let mut config = config();
    let mut reencrypt = pool("route:shop/re", &[1]);
    reencrypt.protocol = PoolProtocol::Https {
        ca_pem: Some("CA PEM".into()),
    };
    let mut unverified = pool("route:shop/re-any", &[1]);
    unverified.protocol = PoolProtocol::Https { ca_pem: None };
    for p in [reencrypt, unverified, pool("route:shop/pass", &[2, 0])] {
        config.pools.insert(p.id.clone(), p);
    }
    config
        .passthrough
        .insert("pass.example.com".into(), "route:shop/pass".into());
    config
        .https
        .insert_policy(
            Policy::new(
                "re",
                Action::RedirectToPool {
                    pool: "route:shop/re".into(),
                },
                vec![Rule::new(
                    RuleType::HostName,
                    CompareType::EqualTo,
                    "re.example.com",
                )],
            ),
            None,
        )
        .unwrap();
    config.certificates = vec![
        certificate(&["Shop.example.com", "*.wild.example.com"], "shop"),
        certificate(&["shop.example.com"], "shadowed"),
        certificate(&["shop.example.com", "edge.example.com"], "edge"),
        certificate(&[], "hostless"),
    ];
    config
}

#[test]
fn reject_comes_before_redirects_before_pools_as_on_octavia() {
    let text = render(&config(), &settings()).config;
    let deny = text.find("http-request deny if !policy_3_rule_0").unwrap();
    let decide_redirect = text
        .find("set-var(txn.l7_redirect) int(2) if !l7_redirect_decided policy_2_rule_0\n")
        .unwrap();
    let decide_pool = text
        .find("set-var(txn.l7_backend) str(pool_1) if !l7_backend_decided policy_1_rule_0 policy_1_rule_1\n")
        .unwrap();
    let redirect = text
        .find("redirect prefix 'https://shop.example.com' code 301 if { var(txn.l7_redirect) -m int 2 }")
        .unwrap();
    let pool = text
        .find("use_backend %[var(txn.l7_backend)] if l7_backend_decided")
        .unwrap();
    assert!(
        deny < decide_redirect && decide_redirect < redirect,
        "{text}"
    );
    assert!(decide_pool < redirect && redirect < pool, "{text}");
    assert!(
        text.contains("acl policy_1_rule_0 req.hdr(host),field(1,:) -i -m str 'shop.example.com'")
    );
    assert!(text.contains(r"acl policy_1_rule_1 path -m reg '(?s)^/it'\''s(?:/.*)?$'"));
    assert!(text.contains("acl policy_3_rule_0 req.hdr(User-Agent) -m sub 'bot'"));
    assert!(text.contains("default_backend no_match"));
    assert!(text.contains("backend no_match\n    http-request return status 404"));
}

#[test]
fn rules_match_the_normalised_path_and_the_original_target_is_put_back_before_acting() {
    let text = render(&config(), &settings()).config;
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle} missing:\n{text}"))
    };
    let keep = at("http-request set-var(txn.l7_target) pathq\n");
    let dotdot = at("http-request normalize-uri path-strip-dotdot full\n");
    let dot = at("http-request normalize-uri path-strip-dot\n");
    let deny = at("http-request deny if");
    let decide = at("set-var(txn.l7_backend)");
    let restore = at("http-request set-pathq %[var(txn.l7_target)]\n");
    let redirect = at("redirect prefix");
    assert!(
        keep < dotdot && dotdot < dot && dot < deny && deny < decide,
        "{text}"
    );
    assert!(decide < restore && restore < redirect, "{text}");
    assert!(text.contains("expose-experimental-directives"));
}

#[test]
fn pools_become_backends_with_weights_and_empty_pools_answer_503() {
    let text = render(&config(), &settings()).config;
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
    let a = render(&tls_config(), &tls_settings(true));
    assert_eq!(a, render(&tls_config(), &tls_settings(true)));
    assert!(a.config.contains("    master-worker\n"));
    assert!(
        a.config.contains(
            "stats socket '/run/l7/haproxy.sock' mode 600 level admin expose-fd listeners"
        )
    );
}

#[test]
fn without_a_tls_address_there_is_no_tls_frontend_and_no_key_file() {
    let rendered = render(&tls_config(), &settings());
    assert!(!rendered.config.contains("frontend tls"));
    assert!(!rendered.config.contains("frontend https"));
    assert!(
        rendered.files.iter().all(|f| !f.private),
        "{:?}",
        rendered.files
    );
    // The reencrypt pool's CA file is still written (HTTPS pools serve plain HTTP too).
    assert!(rendered.files.iter().any(|f| f.content == "CA PEM"));
}

#[test]
fn passthrough_hosts_go_to_tcp_backends_by_sni_and_the_rest_is_terminated() {
    let text = render(&tls_config(), &tls_settings(true)).config;
    // Pools by id: route:shop/pass pool_0, route:shop/re pool_1, route:shop/re-any pool_2.
    assert!(text.contains(
        "frontend tls\n    mode tcp\n    bind 127.0.0.1:8443\n    tcp-request inspect-delay 5s\n    tcp-request content accept if { req.ssl_hello_type 1 }\n    use_backend pool_0_tcp if { req.ssl_sni -i 'pass.example.com' }\n    default_backend tls_terminate\n"
    ), "{text}");
    assert!(text.contains(
        "backend pool_0_tcp\n    # route:shop/pass (passthrough)\n    mode tcp\n    balance roundrobin\n    server member_0 10.0.0.1:80 weight 2\n    server member_1 10.0.0.2:80 weight 0\n"
    ), "{text}");
    assert!(text.contains(
        "backend tls_terminate\n    mode tcp\n    server terminate 'unix@/run/l7/tls.sock' send-proxy-v2\n"
    ));
    assert!(text.contains(
        "frontend https\n    bind 'unix@/run/l7/tls.sock' mode 600 accept-proxy ssl crt '/run/l7/default.pem' crt-list '/run/l7/crt-list' alpn h2,http/1.1\n"
    ), "{text}");
    let https = &text[text.find("frontend https").unwrap()..];
    assert!(https.contains("http-request set-header X-Forwarded-Proto https"));
    assert!(
        https.contains(
            "set-var(txn.l7_backend) str(pool_1) if !l7_backend_decided policy_1_rule_0\n"
        )
    );
    assert!(https.contains("default_backend no_match_https"));
    assert!(text.contains("backend no_match_https\n    http-request return status 404"));
}

#[test]
fn reencrypt_pools_verify_members_against_the_destination_ca_or_not_at_all() {
    let text = render(&tls_config(), &tls_settings(true)).config;
    assert!(text.contains(
        "server member_0 10.0.0.1:80 weight 1 ssl verify required ca-file '/run/l7/pool_1-ca.pem'"
    ), "{text}");
    let any = &text[text.find("\nbackend pool_2\n").unwrap()..];
    assert!(any.contains("server member_0 10.0.0.1:80 weight 1 ssl verify none"));
}

#[test]
fn the_first_certificate_naming_a_host_wins_it_and_keys_are_private_files() {
    let rendered = render(&tls_config(), &tls_settings(false));
    let file = |name: &str| {
        rendered
            .files
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name} missing: {:?}", rendered.files))
    };
    // "shadowed" names only shop.example.com, which "shop" already has: left out. "edge" keeps
    // edge.example.com only.
    assert_eq!(
        file(CRT_LIST).content,
        "/run/l7/cert_0.pem shop.example.com *.wild.example.com\n/run/l7/cert_1.pem edge.example.com\n"
    );
    assert!(!file(CRT_LIST).private);
    let shop = file("cert_0.pem");
    assert!(shop.private);
    assert_eq!(
        shop.content,
        "-----BEGIN CERTIFICATE-----\nshop\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nshop-KEY\n-----END PRIVATE KEY-----\n"
    );
    assert!(file("cert_1.pem").content.contains("edge-KEY"));
    // Without --default-cert, a certificate without hosts is the default.
    let default = file(DEFAULT_CERTIFICATE);
    assert!(default.private && default.content.contains("hostless-KEY"));
    assert!(
        !rendered
            .files
            .iter()
            .any(|f| f.content.contains("shadowed"))
    );

    assert!(!rendered.config.contains("strict-sni"));
    // No default at all: an unknown SNI fails the handshake.
    let mut config = tls_config();
    config.certificates.retain(|c| !c.hosts.is_empty());
    let rendered = render(&config, &tls_settings(false));
    assert!(
        rendered
            .config
            .contains("ssl crt-list '/run/l7/crt-list' strict-sni alpn h2,http/1.1\n"),
        "{}",
        rendered.config
    );
    assert!(!rendered.files.iter().any(|f| f.name == DEFAULT_CERTIFICATE));

    // A given default certificate wins over a host-less one.
    let rendered = render(&tls_config(), &tls_settings(true));
    let default = rendered
        .files
        .iter()
        .find(|f| f.name == DEFAULT_CERTIFICATE)
        .unwrap();
    assert!(default.content.contains("DEFAULT-KEY"));
}

#[test]
fn without_any_certificate_only_passthrough_is_served() {
    let mut config = tls_config();
    config.certificates.clear();
    let rendered = render(&config, &tls_settings(false));
    assert!(rendered.config.contains("default_backend tls_refused\n"));
    assert!(
        rendered
            .config
            .contains("backend tls_refused\n    # No certificate: only passthrough hosts are served.\n    mode tcp\n")
    );
    assert!(!rendered.config.contains("frontend https"));
    assert!(rendered.files.iter().all(|f| !f.private));
}

fn arbitrary_config() -> impl Strategy<Value = L7Config> {
    let rule = (
        prop::sample::select(vec![
            RuleType::HostName,
            RuleType::Path,
            RuleType::Header,
            RuleType::Cookie,
        ]),
        prop::sample::select(vec![
            CompareType::EqualTo,
            CompareType::StartsWith,
            CompareType::EndsWith,
            CompareType::Contains,
        ]),
        "[a-z/.']{1,8}",
        any::<bool>(),
    )
        .prop_map(|(rule_type, compare_type, value, invert)| {
            let mut rule = Rule::new(rule_type, compare_type, value);
            if matches!(rule_type, RuleType::Header | RuleType::Cookie) {
                rule = rule.with_key("X-Key");
            }
            if invert { rule.inverted() } else { rule }
        });
    let action = prop_oneof![
        Just(Action::Reject),
        (0..3usize).prop_map(|p| Action::RedirectToPool {
            pool: format!("ns/s{p}:80")
        }),
        Just(Action::RedirectPrefix {
            prefix: "https://x.example".into(),
            code: 302
        }),
        Just(Action::RedirectToUrl {
            url: "https://y.example/".into(),
            code: 301
        }),
    ];
    prop::collection::vec((action, prop::collection::vec(rule, 0..4)), 0..12).prop_map(|policies| {
        let mut config = L7Config::default();
        for p in 0..3 {
            let id = format!("ns/s{p}:80");
            config.pools.insert(id.clone(), pool(&id, &[1]));
        }
        for (index, (action, rules)) in policies.into_iter().enumerate() {
            let policy = Policy::new(format!("p{index}"), action, rules);
            config.http.insert_policy(policy.clone(), None).unwrap();
            config.https.insert_policy(policy, Some(1)).unwrap();
        }
        config
    })
}

proptest! {
    /// Every ACL a rule line uses is declared, every backend a decision names exists, and each
    /// redirect decision has its redirect.
    #[test]
    fn every_name_the_configuration_uses_is_defined(config in arbitrary_config()) {
        let text = render(&config, &tls_settings(true)).config;
        let words: Vec<&str> = text.split_whitespace().collect();
        let declared: BTreeSet<&str> = words
            .windows(2)
            .filter(|w| w[0] == "acl")
            .map(|w| w[1])
            .collect();
        let backends: BTreeSet<&str> = words
            .windows(2)
            .filter(|w| w[0] == "backend")
            .map(|w| w[1])
            .collect();
        for line in text.lines().map(str::trim) {
            if let Some((_, condition)) = line.split_once(" if ")
                && !condition.starts_with('{')
            {
                for acl in condition.split_whitespace() {
                    let acl = acl.trim_start_matches('!');
                    prop_assert!(declared.contains(acl), "{acl} undeclared in {line}");
                }
            }
            if let Some(rest) = line.strip_prefix("http-request set-var(txn.l7_backend) str(") {
                let backend = rest.split(')').next().unwrap();
                prop_assert!(backends.contains(backend), "{backend} missing");
            }
            if let Some(rest) = line.strip_prefix("http-request set-var(txn.l7_redirect) int(") {
                let position = rest.split(')').next().unwrap();
                let wanted = format!("{{ var(txn.l7_redirect) -m int {position} }}");
                prop_assert!(text.contains(&wanted), "no redirect for {position}");
            }
        }
        prop_assert_eq!(&text, &render(&config, &tls_settings(true)).config);
    }
}

#[test]
fn redirect_to_url_is_a_redirect_location_decided_like_a_prefix() {
    let mut config = config();
    config
        .http
        .insert_policy(
            Policy::new(
                "moved",
                Action::RedirectToUrl {
                    url: "https://new.example.com/".into(),
                    code: 308,
                },
                vec![Rule::new(RuleType::Path, CompareType::EqualTo, "/old")],
            ),
            Some(1),
        )
        .unwrap();
    let text = render(&config, &settings()).config;
    assert!(text.contains(
        "http-request set-var(txn.l7_redirect) int(1) if !l7_redirect_decided policy_1_rule_0\n"
    ));
    assert!(text.contains(
        "redirect location 'https://new.example.com/' code 308 if { var(txn.l7_redirect) -m int 1 }\n"
    ), "{text}");
}

#[test]
fn both_http_frontends_drop_an_h2c_upgrade_before_routing() {
    let rendered = render(&tls_config(), &tls_settings(true)).config;
    for frontend in ["frontend http\n", "frontend https\n"] {
        let start = rendered.find(frontend).unwrap();
        let section = &rendered[start..];
        let section = &section[..section[1..]
            .find("\nfrontend ")
            .map_or(section.len(), |i| i + 1)];
        let refusal = section.find(H2C_REFUSAL).expect(frontend);
        let routing = section.find("set-var(txn.l7_target)").unwrap();
        assert!(refusal < routing, "{section}");
    }
}
