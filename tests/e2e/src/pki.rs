//! Mutual TLS for a lab: a throwaway CA, one server certificate every daemon serves with
//! (`localhost`, `127.0.0.1`), a client certificate per identity, and each daemon's policy
//! naming who may call it. [`Lab::enable_mtls`](crate::lab::Lab::enable_mtls) turns it on;
//! the lab then hands every process its files through the `NEPHRITE_*` (and
//! `PREPARER_PLUGIN_*`, `KURYR_L7_ROUTER_NAME`) environment variables.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
};

/// The identity of the person at the keyboard (the preparer CLI): `admin` everywhere.
pub const OPERATOR: &str = "operator";
/// The preparer, as ntc's caller (role `preparer` there).
pub const PREPARER: &str = "preparer";
/// ntc, as the Data API's caller (`admin`: it registers itself as a plugin).
pub const NTC: &str = "ntc";
/// The router, as the controller's caller (role `router`, as itself).
pub const ROUTER: &str = "router-1";

/// Every identity a lab issues a client certificate for.
pub const IDENTITIES: &[&str] = &[OPERATOR, PREPARER, NTC, ROUTER];

/// The files of a lab's PKI.
#[derive(Debug, Clone)]
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// Creates the CA, the server certificate, a client certificate per identity and the
    /// daemons' policies in `dir`.
    ///
    /// # Errors
    /// Key generation, signing or writing failed.
    pub fn create(dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "nephrite demo CA");
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
        };
        write("ca.pem", &ca_cert.pem())?;
        let server_key = KeyPair::generate()?;
        let server = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?
            .signed_by(&server_key, &issuer)?;
        write("server.pem", &server.pem())?;
        write("server-key.pem", &server_key.serialize_pem())?;
        for identity in IDENTITIES {
            let key = KeyPair::generate()?;
            let mut params = CertificateParams::new(vec![(*identity).to_owned()])?;
            params.distinguished_name = DistinguishedName::new();
            params
                .distinguished_name
                .push(DnType::CommonName, *identity);
            let cert = params.signed_by(&key, &issuer)?;
            write(&format!("{identity}.pem"), &cert.pem())?;
            write(&format!("{identity}-key.pem"), &key.serialize_pem())?;
        }
        // Allowlists: identities not named get no role.
        write(
            "preparer-policy.yaml",
            &format!("identities:\n  {OPERATOR}: [admin]\n  {NTC}: [admin]\n"),
        )?;
        write(
            "ntc-policy.yaml",
            &format!("identities:\n  {PREPARER}: [preparer]\n  {OPERATOR}: [admin]\n"),
        )?;
        write(
            "controller-policy.yaml",
            &format!("identities:\n  {ROUTER}: [router]\n  {OPERATOR}: [admin]\n"),
        )?;
        Ok(Self {
            dir: dir.to_owned(),
        })
    }

    /// A file of the PKI.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The PEM text of every private key the PKI wrote (what no log line may hold).
    ///
    /// # Errors
    /// A key file could not be read.
    pub fn private_keys(&self) -> anyhow::Result<Vec<String>> {
        std::iter::once("server-key.pem".to_owned())
            .chain(IDENTITIES.iter().map(|i| format!("{i}-key.pem")))
            .map(|name| {
                std::fs::read_to_string(self.file(&name)).with_context(|| format!("reading {name}"))
            })
            .collect()
    }

    /// The environment the process started as `name` (the lab's daemon or log name) gets:
    /// the server side for the daemons, the client side for their callers.
    pub fn env(&self, name: &str) -> Vec<(String, String)> {
        let file = |f: &str| self.file(f).display().to_string();
        let mut env = Vec::new();
        let mut serve = |policy: &str| {
            env.push(("NEPHRITE_TLS_CERT".to_owned(), file("server.pem")));
            env.push(("NEPHRITE_TLS_KEY".to_owned(), file("server-key.pem")));
            env.push(("NEPHRITE_TLS_CLIENT_CA".to_owned(), file("ca.pem")));
            env.push(("NEPHRITE_AUTH_POLICY".to_owned(), file(policy)));
        };
        let identity = match name {
            "preparer" => {
                serve("preparer-policy.yaml");
                env.push(("PREPARER_PLUGIN_CA".to_owned(), file("ca.pem")));
                env.push(("PREPARER_PLUGIN_CERT".to_owned(), file("preparer.pem")));
                env.push(("PREPARER_PLUGIN_KEY".to_owned(), file("preparer-key.pem")));
                return env;
            }
            "ntc" => {
                serve("ntc-policy.yaml");
                NTC
            }
            "kuryr-l7-controller" => {
                serve("controller-policy.yaml");
                return env;
            }
            "kuryr-l7-router" => {
                env.push(("KURYR_L7_ROUTER_NAME".to_owned(), ROUTER.to_owned()));
                ROUTER
            }
            "preparer-cli" => OPERATOR,
            _ => return env,
        };
        env.push(("NEPHRITE_CA".to_owned(), file("ca.pem")));
        env.push(("NEPHRITE_CERT".to_owned(), file(&format!("{identity}.pem"))));
        env.push((
            "NEPHRITE_KEY".to_owned(),
            file(&format!("{identity}-key.pem")),
        ));
        env
    }
}
