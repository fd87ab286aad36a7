//! Gateway API hostnames: exact names and `*.` wildcards, how they match a request's host, how a
//! listener's hostname and a route's hostnames intersect, and which is more specific.
//!
//! Unlike an Ingress host, a Gateway API wildcard is a suffix match over one *or more* labels:
//! `*.example.com` matches `a.example.com` and `a.b.example.com`, never `example.com`. A route
//! hostname attaches to a listener when the two have a common host; what the rule then serves
//! is the narrower of the two (`*.example.com` on a listener `foo.example.com` serves
//! `foo.example.com` only).

use std::cmp::Reverse;
use std::fmt;

/// A hostname of a listener or route, lower case.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hostname {
    /// An exact host.
    Exact(String),
    /// `*.<suffix>`: any host with at least one more label in front of the suffix.
    Wildcard(String),
}

impl Hostname {
    /// Parses a hostname: DNS labels of letters, digits and `-`, optionally behind `*.`; no IP
    /// address, no port. The error says what is wrong.
    pub fn parse(text: &str) -> Result<Hostname, String> {
        let lower = text.to_ascii_lowercase();
        let (wildcard, rest) = match lower.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, lower.as_str()),
        };
        let valid_label = |label: &str| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        };
        if rest.is_empty() || rest.len() > 253 || !rest.split('.').all(valid_label) {
            return Err(format!(
                "{text:?} is not a DNS name or a wildcard (*.example.com)"
            ));
        }
        if !wildcard && rest.parse::<std::net::Ipv4Addr>().is_ok() {
            return Err(format!("{text:?} is an IP address, not a hostname"));
        }
        Ok(if wildcard {
            Hostname::Wildcard(rest.to_owned())
        } else {
            Hostname::Exact(rest.to_owned())
        })
    }

    /// Whether `host` (lower case, without port) is covered.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            Hostname::Exact(exact) => exact == host,
            Hostname::Wildcard(suffix) => host
                .strip_suffix(suffix.as_str())
                .and_then(|front| front.strip_suffix('.'))
                .is_some_and(|front| !front.is_empty()),
        }
    }

    /// The precedence key: exact names before wildcards, more characters first.
    pub fn specificity(hostname: Option<&Hostname>) -> (u8, Reverse<usize>) {
        match hostname {
            Some(Hostname::Exact(host)) => (0, Reverse(host.len())),
            Some(Hostname::Wildcard(suffix)) => (1, Reverse(suffix.len() + 2)),
            None => (2, Reverse(0)),
        }
    }
}

impl fmt::Display for Hostname {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Hostname::Exact(host) => f.write_str(host),
            Hostname::Wildcard(suffix) => write!(f, "*.{suffix}"),
        }
    }
}

/// The hosts a route hostname serves on a listener: `None` when they share no host.
pub fn intersect(listener: Option<&Hostname>, route: &Hostname) -> Option<Hostname> {
    let Some(listener) = listener else {
        return Some(route.clone());
    };
    match (listener, route) {
        (Hostname::Exact(a), Hostname::Exact(b)) => (a == b).then(|| route.clone()),
        (Hostname::Wildcard(_), Hostname::Exact(host)) => {
            listener.matches(host).then(|| route.clone())
        }
        (Hostname::Exact(host), Hostname::Wildcard(_)) => {
            route.matches(host).then(|| listener.clone())
        }
        (Hostname::Wildcard(outer), Hostname::Wildcard(inner)) => {
            if outer == inner || listener.matches(inner) {
                Some(route.clone())
            } else if route.matches(outer) {
                Some(listener.clone())
            } else {
                None
            }
        }
    }
}

/// The hostnames a route's rules serve on a listener, one entry per distinct host set (`None`
/// = any host); `None` when the route names hostnames and none intersects the listener's.
pub fn effective(listener: Option<&Hostname>, route: &[Hostname]) -> Option<Vec<Option<Hostname>>> {
    if route.is_empty() {
        return Some(vec![listener.cloned()]);
    }
    let mut out: Vec<Option<Hostname>> = Vec::new();
    for hostname in route {
        if let Some(common) = intersect(listener, hostname)
            && !out.contains(&Some(common.clone()))
        {
            out.push(Some(common));
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(text: &str) -> Hostname {
        Hostname::parse(text).unwrap()
    }

    #[test]
    fn wildcards_cover_one_or_more_labels_but_not_the_suffix_itself() {
        let wildcard = h("*.Example.com");
        assert!(wildcard.matches("a.example.com"));
        assert!(wildcard.matches("a.b.example.com"));
        assert!(!wildcard.matches("example.com"));
        assert!(!wildcard.matches("aexample.com"));
    }

    #[test]
    fn parse_refuses_ports_ips_and_empty_labels_naming_the_input() {
        for bad in ["a..b", "host:80", "10.0.0.1", "*.", "", "-a.b"] {
            let err = Hostname::parse(bad).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn intersection_keeps_the_narrower_side() {
        assert_eq!(
            intersect(Some(&h("*.e.com")), &h("a.e.com")),
            Some(h("a.e.com"))
        );
        assert_eq!(
            intersect(Some(&h("a.e.com")), &h("*.e.com")),
            Some(h("a.e.com"))
        );
        assert_eq!(
            intersect(Some(&h("*.e.com")), &h("*.a.e.com")),
            Some(h("*.a.e.com"))
        );
        assert_eq!(
            intersect(Some(&h("*.a.e.com")), &h("*.e.com")),
            Some(h("*.a.e.com"))
        );
        assert_eq!(intersect(Some(&h("a.e.com")), &h("b.e.com")), None);
        assert_eq!(intersect(Some(&h("*.e.com")), &h("e.com")), None);
        assert_eq!(intersect(None, &h("b.e.com")), Some(h("b.e.com")));
    }

    #[test]
    fn effective_is_the_listener_hostname_for_a_route_without_hostnames() {
        assert_eq!(
            effective(Some(&h("a.e.com")), &[]),
            Some(vec![Some(h("a.e.com"))])
        );
        assert_eq!(effective(None, &[]), Some(vec![None]));
        assert_eq!(effective(Some(&h("a.e.com")), &[h("b.e.com")]), None);
    }
}
