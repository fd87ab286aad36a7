//! The credentials the preparer presents when it dials a plugin: `--plugin-ca`,
//! `--plugin-cert`, `--plugin-key`, `--plugin-token-file` (and `PREPARER_PLUGIN_*`), so a
//! plugin such as ntc can require authentication too. They are the runtime's client flags
//! under other names, because `--ca`/`--cert` belong to the preparer's own client commands.

use std::path::PathBuf;

use nephrite_runtime::ClientArgs;

/// Client credentials for plugin calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct PluginCredentials {
    /// Dial plugins with TLS, trusting this PEM CA for their certificates.
    #[arg(long, env = "PREPARER_PLUGIN_CA", value_name = "PEM")]
    pub plugin_ca: Option<PathBuf>,

    /// Present this PEM client certificate to plugins (mutual TLS; needs --plugin-key and
    /// --plugin-ca).
    #[arg(
        long,
        env = "PREPARER_PLUGIN_CERT",
        value_name = "PEM",
        requires_all = ["plugin_key", "plugin_ca"]
    )]
    pub plugin_cert: Option<PathBuf>,

    /// PEM private key of --plugin-cert.
    #[arg(
        long,
        env = "PREPARER_PLUGIN_KEY",
        value_name = "PEM",
        requires = "plugin_cert"
    )]
    pub plugin_key: Option<PathBuf>,

    /// Send plugins the bearer token in this file (its first line), re-read when it changes.
    #[arg(long, env = "PREPARER_PLUGIN_TOKEN_FILE", value_name = "FILE")]
    pub plugin_token_file: Option<PathBuf>,
}

impl PluginCredentials {
    /// The same credentials as the runtime's client flags, which dial.
    pub fn client_args(&self) -> ClientArgs {
        ClientArgs {
            ca: self.plugin_ca.clone(),
            cert: self.plugin_cert.clone(),
            key: self.plugin_key.clone(),
            token_file: self.plugin_token_file.clone(),
            tls_domain: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        credentials: PluginCredentials,
    }

    #[test]
    fn the_flags_become_client_args_and_a_certificate_needs_its_key_and_ca() {
        let flags = Flags::try_parse_from([
            "serve",
            "--plugin-ca",
            "ca.pem",
            "--plugin-cert",
            "c.pem",
            "--plugin-key",
            "k.pem",
            "--plugin-token-file",
            "t",
        ])
        .unwrap();
        let args = flags.credentials.client_args();
        assert_eq!(args.ca, Some(PathBuf::from("ca.pem")));
        assert_eq!(args.cert, Some(PathBuf::from("c.pem")));
        assert_eq!(args.key, Some(PathBuf::from("k.pem")));
        assert_eq!(args.token_file, Some(PathBuf::from("t")));
        assert!(Flags::try_parse_from(["serve", "--plugin-cert", "c.pem"]).is_err());
        assert!(
            Flags::try_parse_from(["serve", "--plugin-cert", "c.pem", "--plugin-key", "k"])
                .is_err()
        );
        assert_eq!(
            Flags::try_parse_from(["serve"]).unwrap().credentials,
            PluginCredentials::default()
        );
    }
}
