//! The cluster's credentials, made fresh by every `up` with `openssl` (Debian's, on every
//! machine this runs on): one CA, the API server's serving certificate, a client certificate
//! per component (the identity Kubernetes' bootstrap RBAC and the Node authorizer expect of
//! it), the service-account signing key, and a kubeconfig per client.
//!
//! Every key is ECDSA P-256, written mode 0600 by openssl's umask below; nothing is reused
//! between clusters. The CA key stays in the directory so the controller-manager can sign
//! CertificateSigningRequests (`kubernetes.io/kube-apiserver-client` and friends).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

/// The Service ClusterIP of `kubernetes.default` in [`super::config::SERVICE_CIDR`].
const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";

/// One client of the API: who it is and the files it presents.
#[derive(Debug, Clone)]
pub struct Client {
    /// The certificate's CN: the user name.
    pub user: String,
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its key (PEM).
    pub key: PathBuf,
    /// Its kubeconfig.
    pub kubeconfig: PathBuf,
}

/// The files of one cluster's credentials.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA certificate every component trusts.
    pub ca_cert: PathBuf,
    /// The CA key (the controller-manager's CSR signer).
    pub ca_key: PathBuf,
    /// kube-apiserver's serving certificate and key.
    pub apiserver_cert: PathBuf,
    /// Its key.
    pub apiserver_key: PathBuf,
    /// The service-account signing key (private, PKCS#8).
    pub service_account_key: PathBuf,
    /// Its public half.
    pub service_account_pub: PathBuf,
    /// The admin (`system:masters`): `DIR/kubeconfig`.
    pub admin: Client,
    /// kube-controller-manager.
    pub controller_manager: Client,
    /// kube-scheduler.
    pub scheduler: Client,
    /// The kubelet (`system:node:<node>` in `system:nodes`).
    pub kubelet: Client,
    /// kube-apiserver towards the kubelets (logs, exec).
    pub apiserver_kubelet_client: Client,
    /// nimbess-agent, bound to the ClusterRole of its DaemonSet manifest.
    pub nimbess_agent: Client,
}

/// The identities: (file stem, CN, O).
fn identities(node: &str) -> [(&'static str, String, Option<&'static str>); 6] {
    [
        ("admin", "nephrite-admin".to_owned(), Some("system:masters")),
        (
            "controller-manager",
            "system:kube-controller-manager".to_owned(),
            None,
        ),
        ("scheduler", "system:kube-scheduler".to_owned(), None),
        (
            "kubelet",
            format!("system:node:{node}"),
            Some("system:nodes"),
        ),
        (
            "apiserver-kubelet-client",
            "kube-apiserver-kubelet-client".to_owned(),
            Some("system:masters"),
        ),
        ("nimbess-agent", "nimbess-agent".to_owned(), None),
    ]
}

impl Pki {
    /// Make everything under `dir/pki`; `server` is the API's URL written into the
    /// kubeconfigs, `node_ip` goes into the serving certificate, `admin_kubeconfig` is where
    /// the admin's kubeconfig goes.
    pub fn create(
        dir: &Path,
        node: &str,
        node_ip: Ipv4Addr,
        server: &str,
        admin_kubeconfig: &Path,
    ) -> anyhow::Result<Pki> {
        let pki = dir.join("pki");
        std::fs::create_dir_all(&pki).with_context(|| format!("creating {}", pki.display()))?;
        let ca_cert = pki.join("ca.crt");
        let ca_key = pki.join("ca.key");
        key(&ca_key)?;
        openssl(
            Command::new("openssl")
                .args(["req", "-x509", "-new", "-sha256", "-days", "3650", "-key"])
                .arg(&ca_key)
                .args(["-subj", "/CN=nephrite cluster CA"])
                .args(["-addext", "basicConstraints=critical,CA:TRUE"])
                .args([
                    "-addext",
                    "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
                ])
                .arg("-out")
                .arg(&ca_cert),
            "the CA certificate",
        )?;
        let sans = format!(
            "subjectAltName=IP:127.0.0.1,IP:{node_ip},IP:{KUBERNETES_SERVICE_IP},DNS:localhost,\
             DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,\
             DNS:kubernetes.default.svc.cluster.local"
        );
        let (apiserver_cert, apiserver_key) = leaf(
            &pki,
            "apiserver",
            "kube-apiserver",
            None,
            "serverAuth",
            Some(&sans),
            &ca_cert,
            &ca_key,
        )?;
        let service_account_key = pki.join("service-account.key");
        let service_account_pub = pki.join("service-account.pub");
        key(&service_account_key)?;
        openssl(
            Command::new("openssl")
                .args(["pkey", "-pubout", "-in"])
                .arg(&service_account_key)
                .arg("-out")
                .arg(&service_account_pub),
            "the service-account public key",
        )?;
        let mut clients = Vec::new();
        for (stem, cn, org) in identities(node) {
            let (cert, key) = leaf(&pki, stem, &cn, org, "clientAuth", None, &ca_cert, &ca_key)?;
            let kubeconfig = if stem == "admin" {
                admin_kubeconfig.to_path_buf()
            } else {
                pki.join(format!("{stem}.kubeconfig"))
            };
            write_kubeconfig(&kubeconfig, server, &ca_cert, &cn, &cert, &key)?;
            clients.push(Client {
                user: cn,
                cert,
                key,
                kubeconfig,
            });
        }
        let [
            admin,
            controller_manager,
            scheduler,
            kubelet,
            apiserver_kubelet_client,
            nimbess_agent,
        ]: [Client; 6] = clients
            .try_into()
            .map_err(|_| anyhow::anyhow!("expected six client identities"))?;
        Ok(Pki {
            ca_cert,
            ca_key,
            apiserver_cert,
            apiserver_key,
            service_account_key,
            service_account_pub,
            admin,
            controller_manager,
            scheduler,
            kubelet,
            apiserver_kubelet_client,
            nimbess_agent,
        })
    }
}

/// A fresh P-256 key at `path`, mode 0600.
fn key(path: &Path) -> anyhow::Result<()> {
    openssl(
        Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-out",
            ])
            .arg(path),
        "a key",
    )?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("making {} private", path.display()))
}

/// A certificate for `cn` (in group `org`) with `usage` (`serverAuth` or `clientAuth`) signed
/// by the CA: `<stem>.crt` and `<stem>.key` in `pki`.
#[allow(clippy::too_many_arguments)]
fn leaf(
    pki: &Path,
    stem: &str,
    cn: &str,
    org: Option<&str>,
    usage: &str,
    sans: Option<&str>,
    ca_cert: &Path,
    ca_key: &Path,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let cert = pki.join(format!("{stem}.crt"));
    let key_path = pki.join(format!("{stem}.key"));
    let csr = pki.join(format!("{stem}.csr"));
    key(&key_path)?;
    let subject = match org {
        Some(org) => format!("/O={org}/CN={cn}"),
        None => format!("/CN={cn}"),
    };
    let mut request = Command::new("openssl");
    request
        .args(["req", "-new", "-sha256", "-key"])
        .arg(&key_path)
        .args(["-subj", &subject])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args([
            "-addext",
            "keyUsage=critical,digitalSignature,keyEncipherment",
        ])
        .args(["-addext", &format!("extendedKeyUsage={usage}")]);
    if let Some(sans) = sans {
        request.args(["-addext", sans]);
    }
    request.arg("-out").arg(&csr);
    openssl(&mut request, &format!("the request for {cn}"))?;
    openssl(
        Command::new("openssl")
            .args(["x509", "-req", "-sha256", "-days", "365", "-in"])
            .arg(&csr)
            .arg("-CA")
            .arg(ca_cert)
            .arg("-CAkey")
            .arg(ca_key)
            .args([
                "-set_serial",
                &serial()?,
                "-copy_extensions",
                "copyall",
                "-out",
            ])
            .arg(&cert),
        &format!("the certificate of {cn}"),
    )?;
    let _ = std::fs::remove_file(&csr);
    Ok((cert, key_path))
}

/// A random positive 64-bit serial number (hex, `0x…`).
fn serial() -> anyhow::Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading /dev/urandom")?;
    bytes[0] &= 0x7f;
    Ok(format!(
        "0x{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

/// Run one openssl command, failing with its output.
fn openssl(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let output = command
        .output()
        .with_context(|| format!("running openssl for {what} (Debian: apt-get install openssl)"))?;
    if !output.status.success() {
        anyhow::bail!(
            "openssl failed making {what} ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// A kubeconfig for `server` trusting `ca`, presenting `cert`/`key` as `user` (JSON, which
/// every kubeconfig reader takes; file paths, valid while the cluster's directory is).
fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca: &Path,
    user: &str,
    cert: &Path,
    key: &Path,
) -> anyhow::Result<()> {
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "nephrite", "cluster": {
            "server": server,
            "certificate-authority": ca,
        }}],
        "users": [{"name": user, "user": {
            "client-certificate": cert,
            "client-key": key,
        }}],
        "contexts": [{"name": "nephrite", "context": {
            "cluster": "nephrite", "user": user, "namespace": "default",
        }}],
        "current-context": "nephrite",
    });
    std::fs::write(path, format!("{config:#}\n"))
        .with_context(|| format!("writing {}", path.display()))
}
