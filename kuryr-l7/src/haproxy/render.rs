//! The L7 model rendered as an HAProxy 2.6 configuration, the way Octavia's amphora template
//! writes it: one ACL per rule (`<policy>_<n>`), and per policy, in position order, an
//! `http-request deny` (REJECT), a `redirect location` / `redirect prefix` (REDIRECT_TO_URL /
//! REDIRECT_PREFIX) or a `use_backend` (REDIRECT_TO_POOL) with the policy's ACLs ANDed. HAProxy
//! runs `http-request` rules before `redirect` rules before `use_backend`, so, as on Octavia,
//! REJECT policies come before redirects before pools whatever their positions (the embedded
//! router is strictly first-match by position; Ingress and Route translation never makes the
//! two disagree, since at most one kind of action matches a given request).
//!
//! Matching follows the embedded router where HAProxy can: the host is compared without its
//! port and case-insensitively, the path without its query. Dot-segments are not removed by
//! HAProxy 2.6 without experimental directives, so `/a/../b` is matched as written.
//!
//! Pure: the same model gives the same text.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;

use nephrite_l7::{Action, CompareType, L7Config, Listener, Pool, PoolProtocol, Rule, RuleType};

#[cfg(test)]
mod tests;

/// Where HAProxy listens and keeps its files.
#[derive(Debug, Clone)]
pub struct RenderSettings {
    /// The plain HTTP frontend's address.
    pub listen: SocketAddr,
    /// The stats socket (admin, `expose-fd listeners` for hitless reloads).
    pub stats_socket: String,
    /// Directory for CA files of HTTPS pools.
    pub files_dir: String,
}

/// Quotes a configuration word: single quotes, a `'` written as `'\''`.
pub fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// The HAProxy sample fetch and match method for a rule.
fn acl_expression(rule: &Rule) -> String {
    let method = match (rule.rule_type, rule.compare_type) {
        (RuleType::FileType, CompareType::EqualTo) => "-m str",
        (_, CompareType::EqualTo) => "-m str",
        (_, CompareType::StartsWith) => "-m beg",
        (_, CompareType::EndsWith) => "-m end",
        (_, CompareType::Contains) => "-m sub",
        (_, CompareType::Regex) => "-m reg",
    };
    let key = rule.key.as_deref().unwrap_or_default();
    let value = quote(&rule.value);
    match rule.rule_type {
        RuleType::HostName => format!("req.hdr(host),field(1,:) -i {method} {value}"),
        RuleType::Path => format!("path {method} {value}"),
        RuleType::FileType => match rule.compare_type {
            CompareType::Regex => format!("path,word(-1,.) {method} {value}"),
            _ => format!("path -m end {}", quote(&format!(".{}", rule.value))),
        },
        RuleType::Header => format!("req.hdr({key}) {method} {value}"),
        RuleType::Cookie => format!("req.cook({key}) {method} {value}"),
        RuleType::SslConnHasCert => "ssl_c_used".to_owned(),
        RuleType::SslVerifyResult => format!("ssl_c_verify eq {}", rule.value),
        RuleType::SslDnField => format!("ssl_c_s_dn({key}) {method} {value}"),
    }
}

/// Backend names: `pool_<n>` by pool id order (ids hold `/` and `:`).
pub fn backend_names(config: &L7Config) -> BTreeMap<String, String> {
    config
        .pools
        .keys()
        .enumerate()
        .map(|(index, id)| (id.clone(), format!("pool_{index}")))
        .collect()
}

fn frontend(out: &mut String, listener: &Listener, names: &BTreeMap<String, String>) {
    let mut acls = String::new();
    let mut denies = String::new();
    let mut redirects = String::new();
    let mut backends = String::new();
    for policy in listener.policies() {
        if policy.rules.is_empty() {
            continue; // a policy without rules never matches
        }
        let label = format!("policy_{}", policy.position);
        let mut condition = Vec::new();
        for (index, rule) in policy.rules.iter().enumerate() {
            let acl = format!("{label}_rule_{index}");
            let _ = writeln!(acls, "    acl {acl} {}", acl_expression(rule));
            condition.push(if rule.invert { format!("!{acl}") } else { acl });
        }
        let condition = condition.join(" ");
        let _ = writeln!(acls, "    # {label}: {} ({})", policy.name, policy.origin);
        match &policy.action {
            Action::Reject => {
                let _ = writeln!(denies, "    http-request deny if {condition}");
            }
            Action::RedirectToUrl { url, code } => {
                let _ = writeln!(
                    redirects,
                    "    redirect location {} code {code} if {condition}",
                    quote(url)
                );
            }
            Action::RedirectPrefix { prefix, code } => {
                let _ = writeln!(
                    redirects,
                    "    redirect prefix {} code {code} if {condition}",
                    quote(prefix)
                );
            }
            Action::RedirectToPool { pool } => {
                let backend = names.get(pool).map_or("no_match", String::as_str);
                let _ = writeln!(backends, "    use_backend {backend} if {condition}");
            }
        }
    }
    out.push_str(&acls);
    out.push_str(&denies);
    out.push_str(&redirects);
    out.push_str(&backends);
    let default = listener
        .default_pool
        .as_ref()
        .and_then(|pool| names.get(pool))
        .map_or("no_match", String::as_str);
    let _ = writeln!(out, "    default_backend {default}");
}

/// The members' weights as HAProxy takes them (0–256): larger ones scaled down, keeping the
/// ratios and every non-zero weight non-zero.
pub fn weights(pool: &Pool) -> Vec<u32> {
    let max = pool.members.iter().map(|m| m.weight).max().unwrap_or(0);
    pool.members
        .iter()
        .map(|m| {
            if max <= 256 || m.weight == 0 {
                m.weight
            } else {
                (u64::from(m.weight) * 256 / u64::from(max)).max(1) as u32
            }
        })
        .collect()
}

fn backend(out: &mut String, name: &str, pool: &Pool, settings: &RenderSettings) {
    let _ = writeln!(out, "\nbackend {name}\n    # {}", pool.id);
    let _ = writeln!(out, "    balance roundrobin");
    let tls = match &pool.protocol {
        PoolProtocol::Http => String::new(),
        PoolProtocol::Https { ca_pem: Some(_) } => format!(
            " ssl verify required ca-file {}",
            quote(&format!("{}/{name}-ca.pem", settings.files_dir))
        ),
        PoolProtocol::Https { ca_pem: None } => " ssl verify none".to_owned(),
    };
    for ((index, member), weight) in pool.members.iter().enumerate().zip(weights(pool)) {
        let _ = writeln!(
            out,
            "    server member_{index} {} weight {weight}{tls}",
            member.address
        );
    }
    if !pool.has_weight() {
        let _ = writeln!(out, "    http-request return status 503");
    }
}

/// The CA files HTTPS pools need: (file name in `files_dir`, PEM).
pub fn pool_files(config: &L7Config) -> Vec<(String, String)> {
    let names = backend_names(config);
    config
        .pools
        .values()
        .filter_map(|pool| match &pool.protocol {
            PoolProtocol::Https { ca_pem: Some(pem) } => {
                Some((format!("{}-ca.pem", names[&pool.id]), pem.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The whole configuration (the plain HTTP listener; TLS is served by the embedded router).
pub fn render(config: &L7Config, settings: &RenderSettings) -> String {
    let names = backend_names(config);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Written by kuryr-l7 (haproxy driver); changes are overwritten.
global
    master-worker
    maxconn 4000
    stats socket {} mode 600 level admin expose-fd listeners
    hard-stop-after 30s

defaults
    mode http
    option http-keep-alive
    # On reload, old workers answer the next request with Connection: close instead of
    # closing idle keep-alive connections under a client's feet (no socket errors).
    option idle-close-on-response
    timeout connect 5s
    timeout client 50s
    timeout server 50s
    timeout http-keep-alive 10s
    timeout http-request 10s

frontend http
    bind {}
    option forwardfor
    http-request set-header X-Forwarded-Proto http
    http-request set-header X-Forwarded-Host %[req.hdr(host)]",
        quote(&settings.stats_socket),
        settings.listen
    );
    frontend(&mut out, &config.http, &names);
    let _ = writeln!(
        out,
        "\nbackend no_match\n    http-request return status {}",
        config.http.no_match_status
    );
    for (id, pool) in &config.pools {
        backend(&mut out, &names[id], pool, settings);
    }
    out
}
