//! The credentials one kube-apiserver is started with, made fresh for every start.
//!
//! A throwaway CA signs the serving certificate (for `127.0.0.1` and `localhost`), so a
//! client trusts exactly this server through the CA alone; the service-account signing key
//! lets the TokenRequest API mint tokens; the admin token, in group `system:masters`, is the
//! one static token the server accepts. Nothing here is reused between starts.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// The user name of the admin token (in `system:masters`, so RBAC never refuses it).
pub(crate) const ADMIN_USER: &str = "nephrite-admin";

/// The group that the admin user belongs to: Kubernetes' built-in superuser group.
pub(crate) const ADMIN_GROUP: &str = "system:masters";

/// Why the credentials could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PkiError {
    /// rcgen refused to make a key or certificate.
    #[error("cannot make {what}: {source}")]
    Generate {
        /// Which key or certificate.
        what: &'static str,
        /// rcgen's reason.
        source: rcgen::Error,
    },
    /// Reading randomness or writing a file failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// "write" or "read".
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS reason.
        source: std::io::Error,
    },
}

/// The files and secrets of one server, written under one directory.
#[derive(Debug, Clone)]
pub(crate) struct Pki {
    /// The CA certificate (PEM) that signed the serving certificate.
    pub(crate) ca_pem: String,
    /// The admin bearer token.
    pub(crate) admin_token: String,
    /// `--tls-cert-file`.
    pub(crate) serving_cert: PathBuf,
    /// `--tls-private-key-file`.
    pub(crate) serving_key: PathBuf,
    /// `--service-account-signing-key-file` (PKCS#8 ECDSA).
    pub(crate) service_account_key: PathBuf,
    /// `--service-account-key-file`: its public half, which verifies the tokens.
    pub(crate) service_account_public_key: PathBuf,
    /// `--token-auth-file`.
    pub(crate) token_file: PathBuf,
}

impl Pki {
    /// Make a CA, a serving certificate, a service-account key and an admin token, and write
    /// them (keys and tokens readable by the owner only) into `dir`, which must exist.
    pub(crate) fn create(dir: &Path) -> Result<Pki, PkiError> {
        let generate = |what| move |source| PkiError::Generate { what, source };
        let ca_key = KeyPair::generate().map_err(generate("the CA key"))?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(generate("the CA"))?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        ca.distinguished_name
            .push(DnType::CommonName, "nephrite test kube-apiserver CA");
        let ca_cert = ca.self_signed(&ca_key).map_err(generate("the CA"))?;
        let issuer = Issuer::new(ca, ca_key);

        let serving_key = KeyPair::generate().map_err(generate("the serving key"))?;
        let mut serving = CertificateParams::new(
            ["127.0.0.1", "localhost", "kubernetes", "kubernetes.default"].map(str::to_owned),
        )
        .map_err(generate("the serving certificate"))?;
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        let serving_cert = serving
            .signed_by(&serving_key, &issuer)
            .map_err(generate("the serving certificate"))?;
        let service_account_key =
            KeyPair::generate().map_err(generate("the service-account signing key"))?;
        let admin_token = random_hex()?;

        let pki = Pki {
            ca_pem: ca_cert.pem(),
            admin_token,
            serving_cert: dir.join("serving.crt"),
            serving_key: dir.join("serving.key"),
            service_account_key: dir.join("service-account.key"),
            service_account_public_key: dir.join("service-account.pub"),
            token_file: dir.join("tokens.csv"),
        };
        write(&dir.join("ca.crt"), &pki.ca_pem, false)?;
        write(&pki.serving_cert, &serving_cert.pem(), false)?;
        write(&pki.serving_key, &serving_key.serialize_pem(), true)?;
        write(
            &pki.service_account_key,
            &service_account_key.serialize_pem(),
            true,
        )?;
        write(
            &pki.service_account_public_key,
            &service_account_key.public_key_pem(),
            false,
        )?;
        write(&pki.token_file, &token_file_line(&pki.admin_token), true)?;
        Ok(pki)
    }
}

/// The `--token-auth-file` line of the admin token: `token,user,uid,"group"`.
pub(crate) fn token_file_line(token: &str) -> String {
    format!("{token},{ADMIN_USER},{ADMIN_USER},\"{ADMIN_GROUP}\"\n")
}

/// 32 hex digits from the kernel's random source.
fn random_hex() -> Result<String, PkiError> {
    let path = Path::new("/dev/urandom");
    let mut bytes = [0u8; 16];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|source| PkiError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Write `text` to `path`, mode 0600 when `secret`.
fn write(path: &Path, text: &str, secret: bool) -> Result<(), PkiError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    if secret {
        options.mode(0o600);
    }
    options
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|source| PkiError::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        })
}
