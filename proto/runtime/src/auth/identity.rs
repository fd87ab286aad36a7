//! The identity a request was authenticated as, and how a client certificate names one.

use rustls_pki_types::CertificateDer;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer as _, X509Certificate};

/// How the caller proved its identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// A client certificate chaining to the server's client CA.
    Certificate,
    /// A bearer token from the server's token file.
    Token,
}

/// The authenticated caller of a request, put in the request's extensions by the runtime's
/// authorisation layer. Handlers read it with [`CallerIdentity::of`] to act "as the caller"
/// (e.g. a router may acknowledge only its own versions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerIdentity {
    /// The identity's name: a token's identity, or a certificate's subject CN (else its first
    /// DNS, then URI, subject alternative name).
    pub name: String,
    /// The roles the policy gives it (the policy's default roles when it does not name it;
    /// empty on a server built without a policy).
    pub roles: Vec<String>,
    /// How it was proven.
    pub credential: Credential,
}

impl CallerIdentity {
    /// The caller of `request`, when it was authenticated.
    pub fn of<T>(request: &tonic::Request<T>) -> Option<&CallerIdentity> {
        request.extensions().get::<CallerIdentity>()
    }

    /// Whether the caller holds `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }

    /// PERMISSION_DENIED unless the caller is `name` (or holds the admin role): for methods a
    /// narrow role may call only on its own behalf.
    ///
    /// # Errors
    /// The status to answer with.
    pub fn require_self(&self, name: &str) -> Result<(), tonic::Status> {
        if self.name == name || self.has_role(super::ADMIN_ROLE) {
            Ok(())
        } else {
            Err(crate::status::bounded_status(
                tonic::Code::PermissionDenied,
                format!("{} may act only as itself, not as {name:?}", self.name),
            ))
        }
    }
}

/// The identity a client certificate names: its subject common name, else its first DNS
/// subject alternative name, else its first URI one. `None` for a certificate that cannot be
/// parsed or names nothing.
pub fn identity_of_certificate(certificate: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = X509Certificate::from_der(certificate.as_ref()).ok()?;
    if let Some(cn) = parsed
        .subject()
        .iter_common_name()
        .find_map(|cn| cn.as_str().ok())
        .filter(|cn| !cn.is_empty())
    {
        return Some(cn.to_owned());
    }
    let names = parsed.subject_alternative_name().ok().flatten()?;
    let mut dns = None;
    let mut uri = None;
    for name in &names.value.general_names {
        match name {
            GeneralName::DNSName(n) if dns.is_none() => dns = Some(n.to_string()),
            GeneralName::URI(u) if uri.is_none() => uri = Some(u.to_string()),
            _ => {}
        }
    }
    dns.or(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(name: &str, roles: &[&str]) -> CallerIdentity {
        CallerIdentity {
            name: name.to_owned(),
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            credential: Credential::Token,
        }
    }

    #[test]
    fn a_narrow_role_acts_only_as_itself() {
        let router = caller("router-a", &["router"]);
        assert!(router.require_self("router-a").is_ok());
        let err = router.require_self("router-b").unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        assert_eq!(
            err.message(),
            "router-a may act only as itself, not as \"router-b\""
        );
        assert!(caller("ops", &["admin"]).require_self("router-b").is_ok());
    }

    #[test]
    fn a_certificate_names_its_cn_else_its_first_dns_name() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(vec!["a.test".to_owned(), "b.test".to_owned()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        let plain = params.self_signed(&key).unwrap();
        assert_eq!(
            identity_of_certificate(plain.der()).as_deref(),
            Some("a.test")
        );
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "router-a");
        let named = params.self_signed(&key).unwrap();
        assert_eq!(
            identity_of_certificate(named.der()).as_deref(),
            Some("router-a")
        );
        assert_eq!(
            identity_of_certificate(&CertificateDer::from(vec![1, 2, 3])),
            None
        );
    }
}
