//! Barbican 23, OpenStack's key manager, where the certificates of Octavia's
//! `TERMINATED_HTTPS` listeners are kept.
//!
//! The API is Barbican's own WSGI pipeline (its `barbican-api-paste.ini`, `/v1` on the shipped
//! no-authentication pipeline `barbican_api`: the project is the `X-Project-Id` header) under
//! gunicorn, on SQLite in its temporary directory (`db_auto_create`), with the `simple_crypto`
//! plugin and a throwaway key-encryption key. Two things the no-authentication setup lacks are
//! supplied here:
//!
//! - Barbican 23's `UnauthenticatedContextMiddleware` reads `req.request_id`, which nothing in
//!   that pipeline sets (every request answers 500): the WSGI module gunicorn loads sets it.
//! - Without Keystone every caller has the roles noauth gives, which the new policy defaults
//!   do not let create secrets: `[oslo_policy] enforce_new_defaults = False`.
//!
//! Octavia does not read these containers: its `barbican_cert_manager` reaches Barbican only
//! through a Keystone session, so [`Octavia`](super::octavia) runs `noop_cert_manager`, which
//! takes a container reference without reading it. A test reads back what Barbican holds.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;

use rustix::process::Signal;
use tempfile::TempDir;

use super::venv::Venv;
use super::{READY_TIMEOUT, STOP_GRACE};
use crate::Unavailable;
use crate::http::http_get;
use crate::port::free_loopback_port;
use crate::server_process::ServerProcess;

/// What error messages call this service.
const WHAT: &str = "Barbican";

/// How many ports to try when another process takes the chosen one first.
const PORT_ATTEMPTS: usize = 5;

/// The WSGI module gunicorn loads: the paste pipeline named by `NEPHRITE_BARBICAN_PASTE`, with
/// `sys.argv` cleared (oslo.config would parse gunicorn's) and the request id Barbican 23's
/// no-authentication middleware reads set on every request.
const WSGI_MODULE: &str = "import os, sys, uuid
sys.argv = sys.argv[:1]
from paste import deploy
_app = deploy.loadapp('config:' + os.environ['NEPHRITE_BARBICAN_PASTE'])


def application(environ, start_response):
    attrs = environ.setdefault('webob.adhoc_attrs', {})
    attrs.setdefault('request_id', 'req-' + str(uuid.uuid4()))
    return _app(environ, start_response)
";

/// A running Barbican API; stopped and its directory removed on drop.
#[derive(Debug)]
pub(crate) struct Barbican {
    server: ServerProcess,
    port: u16,
    dir: TempDir,
}

impl Barbican {
    /// Write the paste file, the WSGI module and the configuration, start gunicorn and wait
    /// until `GET /` answers with Barbican's version list (300).
    pub(crate) fn start(venv: &Venv) -> Result<Barbican, Unavailable> {
        let dir = tempfile::Builder::new()
            .prefix("nephrite-barbican-")
            .tempdir()
            .map_err(|e| failed(format!("cannot create a temporary directory: {e}")))?;
        // oslo.config finds ~/.barbican/barbican.conf; HOME is the temporary directory.
        let home = dir.path().join("home");
        let conf_dir = home.join(".barbican");
        std::fs::create_dir_all(&conf_dir)
            .map_err(|e| failed(format!("cannot create {}: {e}", conf_dir.display())))?;
        let shipped = venv.dir().join("etc/barbican/barbican-api-paste.ini");
        let paste = std::fs::read_to_string(&shipped)
            .map_err(|e| failed(format!("cannot read {}: {e}", shipped.display())))?;
        let paste_path = dir.path().join("barbican-api-paste.ini");
        write(&paste_path, &paste_without_keystone(&paste, dir.path())?)?;
        write(&dir.path().join("nephrite_barbican.py"), WSGI_MODULE)?;
        let kek = key_encryption_key()?;
        let database = dir.path().join("barbican.sqlite");
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_loopback_port()
                .map_err(|e| failed(format!("no free port on 127.0.0.1: {e}")))?;
            write(
                &conf_dir.join("barbican.conf"),
                &config(port, &database, &kek),
            )?;
            let mut command = venv.script("gunicorn");
            command
                .args(["--bind", &format!("127.0.0.1:{port}")])
                .args(["--workers", "1", "--timeout", "120", "--chdir"])
                .arg(dir.path())
                .arg("nephrite_barbican:application")
                .current_dir(dir.path())
                .env("HOME", &home)
                .env("NEPHRITE_BARBICAN_PASTE", &paste_path);
            // QUIT: gunicorn's quick shutdown (TERM waits for requests up to 30 s).
            let mut server = ServerProcess::spawn(
                WHAT,
                command,
                &dir.path().join(format!("gunicorn-{attempt}.log")),
                Signal::QUIT,
                STOP_GRACE,
                dir.path(),
            )?;
            let address = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
            let answers = || http_get(address, "/").is_ok_and(|(status, _)| status == 300);
            match server.wait_until_ready(READY_TIMEOUT, answers) {
                Ok(()) => return Ok(Barbican { server, port, dir }),
                Err(not_ready) if not_ready.address_in_use && attempt < PORT_ATTEMPTS => continue,
                Err(not_ready) => return Err(not_ready.into_unavailable(WHAT)),
            }
        }
    }

    /// The API's base URL, `http://127.0.0.1:PORT` (secrets and containers under `/v1/`).
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The process id of gunicorn's master.
    pub(crate) fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// The directory holding configuration, database and logs.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// Barbican's paste file with `/v1` on the no-authentication pipeline and the health check's
/// file in `dir`; Err names the line the shipped file lacks.
fn paste_without_keystone(paste: &str, dir: &Path) -> Result<String, Unavailable> {
    let mut v1 = false;
    let lines: Vec<String> = paste
        .lines()
        .map(|line| {
            if line.starts_with("/v1:") {
                v1 = true;
                "/v1: barbican_api".to_owned()
            } else if line.starts_with("disable_by_file_path") {
                format!(
                    "disable_by_file_path = {}",
                    dir.join("healthcheck_disable").display()
                )
            } else {
                line.to_owned()
            }
        })
        .collect();
    if !v1 || !paste.contains("[pipeline:barbican_api]") {
        return Err(failed(
            "barbican-api-paste.ini has no `/v1:` route or no `[pipeline:barbican_api]`".to_owned(),
        ));
    }
    Ok(lines.join("\n") + "\n")
}

/// `barbican.conf`: SQLite at `database`, `host_href` (the base of the references Barbican
/// hands out) on `port`, the software crypto plugin with `kek`, the legacy policy defaults.
fn config(port: u16, database: &Path, kek: &str) -> String {
    format!(
        "[DEFAULT]
sql_connection = sqlite:///{database}
db_auto_create = True
host_href = http://127.0.0.1:{port}
use_stderr = true

[secretstore]
enabled_secretstore_plugins = store_crypto

[crypto]
enabled_crypto_plugins = simple_crypto

[simple_crypto_plugin]
kek = {kek}

[oslo_policy]
enforce_new_defaults = False
enforce_scope = False
",
        database = database.display()
    )
}

/// A Fernet key (32 random bytes, URL-safe base64) from the kernel's random source.
fn key_encryption_key() -> Result<String, Unavailable> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| failed(format!("cannot read /dev/urandom: {e}")))?;
    Ok(base64_url(&bytes))
}

/// URL-safe base64 with padding, as Fernet keys are written.
fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn write(path: &Path, text: &str) -> Result<(), Unavailable> {
    std::fs::write(path, text).map_err(|e| failed(format!("cannot write {}: {e}", path.display())))
}

fn failed(detail: String) -> Unavailable {
    Unavailable::failed(WHAT, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paste_file_serves_v1_without_keystone() {
        let paste = "[composite:main]\n/v1: barbican-api-keystone\n\
                     [pipeline:barbican_api]\npipeline = request_id apiapp\n[app:healthcheck]\n\
                     disable_by_file_path = /etc/barbican/healthcheck_disable\n";
        let text = paste_without_keystone(paste, Path::new("/d")).unwrap();
        assert!(text.contains("/v1: barbican_api\n"), "{text}");
        assert!(!text.contains("barbican-api-keystone"), "{text}");
        assert!(
            text.contains("disable_by_file_path = /d/healthcheck_disable"),
            "{text}"
        );
        let err = paste_without_keystone("[composite:main]\n", Path::new("/d")).unwrap_err();
        assert!(err.to_string().contains("/v1:"), "{err}");
    }

    #[test]
    fn the_configuration_uses_the_software_store_and_the_legacy_policy() {
        let text = config(9311, Path::new("/d/b.sqlite"), "KEK=");
        for line in [
            "sql_connection = sqlite:////d/b.sqlite",
            "host_href = http://127.0.0.1:9311",
            "enabled_secretstore_plugins = store_crypto",
            "kek = KEK=",
            "enforce_new_defaults = False",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }

    #[test]
    fn fernet_keys_are_url_safe_base64_of_32_bytes() {
        assert_eq!(base64_url(b"\xff\xfe\xfd"), "__79");
        assert_eq!(base64_url(b"ab"), "YWI=");
        let key = key_encryption_key().unwrap();
        assert_eq!(key.len(), 44);
        assert!(key.ends_with('='));
        assert_ne!(key, key_encryption_key().unwrap());
    }
}
