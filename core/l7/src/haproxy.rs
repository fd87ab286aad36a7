//! The L7 model rendered as an HAProxy 2.6 configuration, the way Octavia's amphora template
//! writes it, plus the TLS front the OpenShift router puts before it. Pure: the same model and
//! settings give the same text and files; writing them and running HAProxy is the caller's job.
//!
//! Plain HTTP (`frontend http`): one ACL per rule (`policy_<position>_rule_<n>`); per policy,
//! in position order, an `http-request deny` (REJECT), a redirect (REDIRECT_TO_URL /
//! REDIRECT_PREFIX) or a backend (REDIRECT_TO_POOL), the policy's ACLs ANDed. As on Octavia,
//! REJECT policies come before redirects before pools whatever their positions (the embedded
//! router is strictly first-match by position; Ingress and Route translation never makes the
//! two disagree, since at most one kind of action matches a given request).
//!
//! Matching follows the embedded router: the host without its port, case-insensitively; the
//! path without its query and with dot-segments removed (`normalize-uri path-strip-dotdot full`
//! and `path-strip-dot`, which HAProxy 2.6 ships as experimental directives), `%2F` not
//! decoded — while the original request target is forwarded. So the original `pathq` is kept
//! in `txn.l7_target`, the path normalised, the first matching redirect and pool decided into
//! `txn.l7_redirect` / `txn.l7_backend`, the original target put back, and only then the
//! redirect (whose `prefix` form appends the original target) or `use_backend
//! %[var(txn.l7_backend)]` applied.
//!
//! TLS (`frontend tls`, when a TLS address is given), as the OpenShift router does it: a TCP
//! frontend reads the ClientHello's SNI (`req.ssl_sni`) and forwards passthrough hosts' TLS
//! streams untouched to TCP backends; every other connection goes through a local Unix socket
//! (PROXY protocol v2, so the client address survives) to `frontend https`, which terminates
//! TLS with the certificate its `crt-list` names for the SNI (exact hosts before `*.` wildcards,
//! the first certificate naming a host wins) or the default certificate (none: `strict-sni`,
//! an unknown SNI fails the handshake, as in the router), offers ALPN `h2` and
//! `http/1.1`, and routes by the model's HTTPS listener exactly as `frontend http` does.
//! Reencrypt pools talk TLS to their members, verified against the Route's
//! `destinationCACertificate` (`ssl verify required ca-file`) or not verified without one.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::SocketAddr;

use crate::model::{
    Action, Certificate, CompareType, L7Config, Listener, Pool, PoolProtocol, Rule, RuleType,
};

mod filters;
#[cfg(test)]
mod tests;

/// Where HAProxy listens and keeps its files.
#[derive(Debug, Clone)]
pub struct RenderSettings {
    /// The plain HTTP frontend's address.
    pub listen: SocketAddr,
    /// The TLS frontend's address (termination by SNI, passthrough); `None`: no TLS.
    pub listen_tls: Option<SocketAddr>,
    /// The stats socket (admin, `expose-fd listeners` for hitless reloads).
    pub stats_socket: String,
    /// The directory the [`Rendered::files`] are written to (no whitespace).
    pub files_dir: String,
    /// The certificate for TLS hosts without their own (`hosts` is ignored).
    pub default_certificate: Option<Certificate>,
}

/// A file the configuration refers to, to be written into [`RenderSettings::files_dir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    /// The file name (no directory).
    pub name: String,
    /// Its content.
    pub content: String,
    /// Holds a private key: write it readable by its owner only (mode 0600).
    pub private: bool,
}

/// A rendered configuration and the files it refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// `haproxy.cfg`.
    pub config: String,
    /// Certificates (certificate chain and key in one PEM), the `crt-list`, CA files.
    pub files: Vec<ConfigFile>,
}

/// The `crt-list` file name.
pub const CRT_LIST: &str = "crt-list";
/// The default certificate's file name.
pub const DEFAULT_CERTIFICATE: &str = "default.pem";
/// The Unix socket between the TLS frontend and the terminating one.
pub const TLS_SOCKET: &str = "tls.sock";

/// Quotes a configuration word: single quotes, a `'` written as `'\''`.
pub fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// The HAProxy sample fetch and match method for a rule.
fn acl_expression(rule: &Rule) -> String {
    let method = match rule.compare_type {
        CompareType::EqualTo => "-m str",
        CompareType::StartsWith => "-m beg",
        CompareType::EndsWith => "-m end",
        CompareType::Contains => "-m sub",
        CompareType::Regex => "-m reg",
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
        RuleType::Method => format!("method -m str {value}"),
        // In an ACL `urlp` tries every occurrence; the variable holds the first only.
        RuleType::QueryParam => format!("var({}) {method} {value}", query_var(key)),
    }
}

/// The variable holding the first value of query parameter `key` (its name in hex, as
/// variable names allow only a few characters).
fn query_var(key: &str) -> String {
    let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
    format!("txn.l7_q_{hex}")
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

/// The backend a passthrough pool gets (TCP mode).
fn passthrough_backend(name: &str) -> String {
    format!("{name}_tcp")
}

/// HAProxy 2.6 forwards an HTTP/1.1 `Upgrade: h2c` to the member, whose `101` would turn the
/// connection into an HTTP/2 tunnel past every rule (h2c smuggling). The upgrade is refused by
/// dropping it: the request goes on as plain HTTP/1.1, as on the embedded router.
pub const H2C_REFUSAL: &str =
    "    # An h2c upgrade is refused: the request goes on as plain HTTP/1.1.
    acl h2c_upgrade req.hdr(upgrade) -m sub -i h2c
    http-request del-header connection if h2c_upgrade
    http-request del-header upgrade if h2c_upgrade
    http-request del-header http2-settings
";

/// The header lines and the policy decision of an HTTP frontend for `listener`.
fn routing(
    out: &mut String,
    listener: &Listener,
    names: &BTreeMap<String, String>,
    no_match: &str,
) {
    let mut acls = String::new();
    let mut denies = String::new();
    let mut decisions = String::new();
    let mut redirects = String::new();
    let mut filter_lines = String::new();
    let mut response_lines = String::new();
    let mut query_keys = BTreeSet::new();
    for policy in listener.policies() {
        for rule in &policy.rules {
            if rule.rule_type == RuleType::QueryParam
                && let Some(key) = &rule.key
                && query_keys.insert(key.clone())
            {
                let _ = writeln!(
                    acls,
                    "    http-request set-var({}) urlp({key})",
                    query_var(key)
                );
            }
        }
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
        let position = policy.position;
        match &policy.action {
            Action::Reject => {
                let _ = writeln!(denies, "    http-request deny if {condition}");
            }
            Action::RedirectToUrl { url: target, code }
            | Action::RedirectPrefix {
                prefix: target,
                code,
            } => {
                let form = match policy.action {
                    Action::RedirectToUrl { .. } => "location",
                    _ => "prefix",
                };
                let _ = writeln!(
                    decisions,
                    "    http-request set-var(txn.l7_redirect) int({position}) if !l7_redirect_decided {condition}"
                );
                let _ = writeln!(
                    redirects,
                    "    redirect {form} {} code {code} if {{ var(txn.l7_redirect) -m int {position} }}",
                    quote(target)
                );
            }
            Action::Redirect { .. } => {
                let _ = writeln!(
                    decisions,
                    "    http-request set-var(txn.l7_redirect) int({position}) if !l7_redirect_decided {condition}"
                );
            }
            Action::RedirectToPool { pool } => {
                let backend = names.get(pool).map_or(no_match, String::as_str);
                let _ = writeln!(
                    decisions,
                    "    http-request set-var(txn.l7_policy) int({position}) if !l7_backend_decided {condition}"
                );
                let _ = writeln!(
                    decisions,
                    "    http-request set-var(txn.l7_backend) str({backend}) if !l7_backend_decided {condition}"
                );
            }
        }
        if filters::needed(policy) {
            filters::render(&mut filter_lines, &mut response_lines, policy);
        }
    }
    out.push_str(H2C_REFUSAL);
    out.push_str(
        "    # Rules match the path with dot-segments removed; the original target is forwarded.
    http-request set-var(txn.l7_target) pathq
    http-request normalize-uri path-strip-dotdot full
    http-request normalize-uri path-strip-dot
    acl l7_redirect_decided var(txn.l7_redirect) -m found
    acl l7_backend_decided var(txn.l7_backend) -m found
",
    );
    out.push_str(&acls);
    out.push_str(&denies);
    out.push_str(&decisions);
    out.push_str("    http-request set-pathq %[var(txn.l7_target)]\n");
    out.push_str(&redirects);
    out.push_str(&filter_lines);
    out.push_str(&response_lines);
    out.push_str("    use_backend %[var(txn.l7_backend)] if l7_backend_decided\n");
    let default = listener
        .default_pool
        .as_ref()
        .and_then(|pool| names.get(pool))
        .map_or(no_match, String::as_str);
    let _ = writeln!(out, "    default_backend {default}");
}

/// The members' weights as HAProxy takes them (0–256): larger ones scaled down, keeping the
/// ratios and every non-zero weight non-zero; the pool's 500 share
/// ([`Pool::unavailable_weight`]) last when it has one.
pub fn weights(pool: &Pool) -> Vec<u32> {
    let all: Vec<u32> = pool
        .members
        .iter()
        .map(|m| m.weight)
        .chain((pool.unavailable_weight > 0).then_some(pool.unavailable_weight))
        .collect();
    let max = all.iter().copied().max().unwrap_or(0);
    all.into_iter()
        .map(|weight| {
            if max <= 256 || weight == 0 {
                weight
            } else {
                (u64::from(weight) * 256 / u64::from(max)).max(1) as u32
            }
        })
        .collect()
}

/// The local frontend answering the 500 of a pool's unavailable share.
pub const UNAVAILABLE_SOCKET: &str = "unavailable.sock";

fn servers(out: &mut String, pool: &Pool, options: &str, files_dir: &str) {
    let weights = weights(pool);
    for ((index, member), weight) in pool.members.iter().enumerate().zip(&weights) {
        let _ = writeln!(
            out,
            "    server member_{index} {} weight {weight}{options}",
            member.address
        );
    }
    if let Some(weight) = weights.get(pool.members.len()) {
        let _ = writeln!(
            out,
            "    server unavailable {} weight {weight}",
            quote(&format!("unix@{files_dir}/{UNAVAILABLE_SOCKET}"))
        );
    }
}

fn ca_file(name: &str) -> String {
    format!("{name}-ca.pem")
}

fn backend(out: &mut String, name: &str, pool: &Pool, settings: &RenderSettings) {
    let _ = writeln!(out, "\nbackend {name}\n    # {}", pool.id);
    let _ = writeln!(out, "    balance roundrobin");
    let tls = match &pool.protocol {
        PoolProtocol::Http => String::new(),
        PoolProtocol::Https { ca_pem: Some(_) } => format!(
            " ssl verify required ca-file {}",
            quote(&format!("{}/{}", settings.files_dir, ca_file(name)))
        ),
        PoolProtocol::Https { ca_pem: None } => " ssl verify none".to_owned(),
    };
    servers(out, pool, &tls, &settings.files_dir);
    if !pool.has_weight() && pool.unavailable_weight == 0 {
        let _ = writeln!(out, "    http-request return status 503");
    }
}

/// The certificates the terminating frontend serves: the default one, and `crt-list` lines
/// (file, PEM, SNI hosts), chosen as the embedded router chooses — the first certificate naming
/// a host wins it, one without hosts is the default when no default is given.
struct CertificatePlan {
    default: Option<String>,
    listed: Vec<(String, String, Vec<String>)>,
}

fn pem(certificate: &Certificate) -> String {
    let mut pem = certificate.cert_pem.trim_end().to_owned();
    pem.push('\n');
    pem.push_str(certificate.key_pem.trim_end());
    pem.push('\n');
    pem
}

fn certificate_plan(config: &L7Config, settings: &RenderSettings) -> CertificatePlan {
    let mut default = settings.default_certificate.as_ref().map(pem);
    let mut claimed = BTreeSet::new();
    let mut listed = Vec::new();
    for certificate in &config.certificates {
        if certificate.hosts.is_empty() {
            if default.is_none() {
                default = Some(pem(certificate));
            }
            continue;
        }
        let hosts: Vec<String> = certificate
            .hosts
            .iter()
            .map(|host| host.to_ascii_lowercase())
            .filter(|host| claimed.insert(host.clone()))
            .collect();
        if !hosts.is_empty() {
            listed.push((
                format!("cert_{}.pem", listed.len()),
                pem(certificate),
                hosts,
            ));
        }
    }
    CertificatePlan { default, listed }
}

/// The files [`render`] refers to: CA files of HTTPS pools, certificates and the `crt-list`.
fn files(config: &L7Config, settings: &RenderSettings, plan: &CertificatePlan) -> Vec<ConfigFile> {
    let names = backend_names(config);
    let mut files: Vec<ConfigFile> = config
        .pools
        .values()
        .filter_map(|pool| match &pool.protocol {
            PoolProtocol::Https { ca_pem: Some(pem) } => Some(ConfigFile {
                name: ca_file(&names[&pool.id]),
                content: pem.clone(),
                private: false,
            }),
            _ => None,
        })
        .collect();
    if settings.listen_tls.is_none() {
        return files;
    }
    if let Some(default) = &plan.default {
        files.push(ConfigFile {
            name: DEFAULT_CERTIFICATE.into(),
            content: default.clone(),
            private: true,
        });
    }
    let mut list = String::new();
    for (name, pem, hosts) in &plan.listed {
        let _ = writeln!(list, "{}/{name} {}", settings.files_dir, hosts.join(" "));
        files.push(ConfigFile {
            name: name.clone(),
            content: pem.clone(),
            private: true,
        });
    }
    files.push(ConfigFile {
        name: CRT_LIST.into(),
        content: list,
        private: false,
    });
    files
}

fn tls_frontends(
    out: &mut String,
    config: &L7Config,
    settings: &RenderSettings,
    address: SocketAddr,
    plan: &CertificatePlan,
    names: &BTreeMap<String, String>,
) {
    let terminates = plan.default.is_some() || !plan.listed.is_empty();
    let _ = writeln!(
        out,
        "\nfrontend tls
    mode tcp
    bind {address}
    tcp-request inspect-delay 5s
    tcp-request content accept if {{ req.ssl_hello_type 1 }}"
    );
    for (host, pool) in &config.passthrough {
        if let Some(name) = names.get(pool) {
            let _ = writeln!(
                out,
                "    use_backend {} if {{ req.ssl_sni -i {} }}",
                passthrough_backend(name),
                quote(host)
            );
        }
    }
    let _ = writeln!(
        out,
        "    default_backend {}",
        if terminates {
            "tls_terminate"
        } else {
            "tls_refused"
        }
    );
    let socket = quote(&format!("unix@{}/{TLS_SOCKET}", settings.files_dir));
    if !terminates {
        let _ = writeln!(
            out,
            "\nbackend tls_refused\n    # No certificate: only passthrough hosts are served.\n    mode tcp"
        );
    } else {
        let _ = writeln!(
            out,
            "\nbackend tls_terminate\n    mode tcp\n    server terminate {socket} send-proxy-v2"
        );
        let mut certificates = String::new();
        if plan.default.is_some() {
            let _ = write!(
                certificates,
                " crt {}",
                quote(&format!("{}/{DEFAULT_CERTIFICATE}", settings.files_dir))
            );
        }
        if !plan.listed.is_empty() {
            let _ = write!(
                certificates,
                " crt-list {}",
                quote(&format!("{}/{CRT_LIST}", settings.files_dir))
            );
        }
        if plan.default.is_none() {
            // No default certificate: an unknown SNI fails the handshake, as in the router
            // (HAProxy would otherwise answer with the first listed certificate).
            certificates.push_str(" strict-sni");
        }
        let _ = writeln!(
            out,
            "\nfrontend https
    bind {socket} mode 600 accept-proxy ssl{certificates} alpn h2,http/1.1
    option idle-close-on-response
    option forwardfor
    http-request set-header X-Forwarded-Proto https
    http-request set-header X-Forwarded-Host %[req.hdr(host)]"
        );
        routing(out, &config.https, names, "no_match_https");
        let _ = writeln!(
            out,
            "\nbackend no_match_https\n    http-request return status {}",
            config.https.no_match_status
        );
    }
    let passthrough: BTreeSet<&String> = config.passthrough.values().collect();
    for pool in passthrough {
        if let (Some(name), Some(members)) = (names.get(pool), config.pools.get(pool)) {
            let _ = writeln!(
                out,
                "\nbackend {}\n    # {} (passthrough)\n    mode tcp\n    balance roundrobin",
                passthrough_backend(name),
                members.id
            );
            servers(out, members, "", &settings.files_dir);
        }
    }
}

/// The whole configuration and the files it refers to.
pub fn render(config: &L7Config, settings: &RenderSettings) -> Rendered {
    let names = backend_names(config);
    let plan = certificate_plan(config, settings);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Written by kuryr-l7 (haproxy driver); changes are overwritten.
global
    master-worker
    maxconn 4000
    stats socket {} mode 600 level admin expose-fd listeners
    hard-stop-after 30s
    # normalize-uri (dot-segment removal) is experimental in HAProxy 2.6.
    expose-experimental-directives

defaults
    mode http
    option http-keep-alive
    timeout connect 5s
    timeout client 50s
    timeout server 50s
    timeout http-keep-alive 10s
    timeout http-request 10s

frontend http
    bind {}
    # On reload, old workers answer the next request with Connection: close instead of
    # closing idle keep-alive connections under a client's feet (no socket errors).
    option idle-close-on-response
    option forwardfor
    http-request set-header X-Forwarded-Proto http
    http-request set-header X-Forwarded-Host %[req.hdr(host)]",
        quote(&settings.stats_socket),
        settings.listen
    );
    routing(&mut out, &config.http, &names, "no_match");
    let _ = writeln!(
        out,
        "\nbackend no_match\n    http-request return status {}",
        config.http.no_match_status
    );
    if let Some(address) = settings.listen_tls {
        tls_frontends(&mut out, config, settings, address, &plan, &names);
    }
    for (id, pool) in &config.pools {
        backend(&mut out, &names[id], pool, settings);
    }
    if config.pools.values().any(|p| p.unavailable_weight > 0) {
        let _ = writeln!(
            out,
            "\nfrontend unavailable\n    # The 500 share of pools whose backends do not resolve.\n    bind {} mode 600\n    http-request return status 500",
            quote(&format!("unix@{}/{UNAVAILABLE_SOCKET}", settings.files_dir))
        );
    }
    Rendered {
        files: files(config, settings, &plan),
        config: out,
    }
}
