//! The credentials `nimbess-cni` presents to the agent: keys of the network configuration
//! named as every Nephrite client's flags (`ca`, `cert`, `key`, `tokenFile`, `tlsDomain` for
//! `--ca`, `--cert`, `--key`, `--token-file`, `--tls-domain`), each falling back to the
//! environment variable of that flag (`NEPHRITE_CA`, `NEPHRITE_CERT`, `NEPHRITE_KEY`,
//! `NEPHRITE_TOKEN_FILE`, `NEPHRITE_TLS_DOMAIN`) when the configuration does not set it.
//! Without any, the plugin calls the agent without credentials (an agent that requires none).

use std::collections::BTreeMap;
use std::path::PathBuf;

use nephrite_runtime::ClientArgs;
use nimbess_client::cni::{CniError, ErrorCode};
use serde_json::Value;

/// The configuration keys and the environment variables they fall back to.
pub const CREDENTIAL_KEYS: [(&str, &str); 5] = [
    ("ca", "NEPHRITE_CA"),
    ("cert", "NEPHRITE_CERT"),
    ("key", "NEPHRITE_KEY"),
    ("tokenFile", "NEPHRITE_TOKEN_FILE"),
    ("tlsDomain", "NEPHRITE_TLS_DOMAIN"),
];

/// The credentials of the network configuration `raw`, or of `env` for the keys it does not
/// set.
///
/// # Errors
/// Code 7 naming the key when a value is not a non-empty string, or when `cert` and `key`
/// are not given together, or `cert` without `ca`.
pub fn agent_credentials(
    raw: &Value,
    env: &BTreeMap<String, String>,
) -> Result<ClientArgs, CniError> {
    let mut values = CREDENTIAL_KEYS
        .iter()
        .map(|(key, var)| match raw.get(*key) {
            None => Ok(env.get(*var).filter(|v| !v.is_empty()).cloned()),
            Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
            Some(_) => Err(CniError::new(
                ErrorCode::InvalidConfig,
                format!("network configuration field {key:?} must be a non-empty string"),
            )),
        });
    let mut next = || values.next().unwrap_or(Ok(None));
    let (ca, cert, key, token_file, tls_domain) = (next()?, next()?, next()?, next()?, next()?);
    let invalid = |msg: &str| Err(CniError::new(ErrorCode::InvalidConfig, msg));
    match (&ca, &cert, &key) {
        (_, Some(_), None) => {
            return invalid("the agent credentials give \"cert\" without its \"key\"");
        }
        (_, None, Some(_)) => {
            return invalid("the agent credentials give \"key\" without its \"cert\"");
        }
        (None, Some(_), Some(_)) => {
            return invalid(
                "the agent credentials give \"cert\" without \"ca\" (the CA of the agent's \
                 certificate)",
            );
        }
        _ => {}
    }
    Ok(ClientArgs {
        ca: ca.map(PathBuf::from),
        cert: cert.map(PathBuf::from),
        key: key.map(PathBuf::from),
        token_file: token_file.map(PathBuf::from),
        tls_domain,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn none_configured_is_no_credentials() {
        let args = agent_credentials(&json!({"name": "blue"}), &env(&[])).unwrap();
        assert_eq!(args, ClientArgs::default());
    }

    #[test]
    fn the_configuration_wins_and_the_environment_fills_in() {
        let conf = json!({"tokenFile": "/etc/cni/token", "ca": "/etc/cni/ca.pem"});
        let args = agent_credentials(
            &conf,
            &env(&[
                ("NEPHRITE_TOKEN_FILE", "/run/other"),
                ("NEPHRITE_TLS_DOMAIN", "agent.local"),
            ]),
        )
        .unwrap();
        assert_eq!(args.token_file, Some(PathBuf::from("/etc/cni/token")));
        assert_eq!(args.ca, Some(PathBuf::from("/etc/cni/ca.pem")));
        assert_eq!(args.tls_domain.as_deref(), Some("agent.local"));
        assert_eq!(args.cert, None);
        let from_env =
            agent_credentials(&json!({}), &env(&[("NEPHRITE_TOKEN_FILE", "/run/t")])).unwrap();
        assert_eq!(from_env.token_file, Some(PathBuf::from("/run/t")));
    }

    #[test]
    fn bad_or_incomplete_credentials_are_code_7_naming_the_key() {
        let cases = [
            (json!({"tokenFile": 3}), "\"tokenFile\""),
            (json!({"ca": ""}), "\"ca\""),
            (json!({"ca": "c", "cert": "x"}), "without its \"key\""),
            (json!({"ca": "c", "key": "x"}), "without its \"cert\""),
            (json!({"cert": "x", "key": "y"}), "without \"ca\""),
        ];
        for (conf, named) in cases {
            let err = agent_credentials(&conf, &env(&[])).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidConfig, "{conf}");
            assert!(err.msg.contains(named), "{conf}: {}", err.msg);
        }
        // A certificate half in the configuration and half in the environment is one pair.
        let mixed = agent_credentials(
            &json!({"ca": "c", "cert": "x"}),
            &env(&[("NEPHRITE_KEY", "y")]),
        )
        .unwrap();
        assert_eq!(mixed.key, Some(PathBuf::from("y")));
    }
}
