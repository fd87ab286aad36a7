//! `kuryr-l7 controller`'s configuration: `kuryr.conf` and flags say the same thing the same
//! way, and a flag wins over the file.

use std::io::Write;

use clap::Parser;

use super::*;
use crate::openstack::Endpoint;
use crate::openstack::auth::Credentials;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: ControllerArgs,
}

fn config(args: &[&str]) -> ControllerConfig {
    let mut argv = vec!["kuryr-l7", "--source", "dir:/tmp", "--node-name", "node-1"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv)
        .unwrap()
        .args
        .into_config()
        .unwrap()
}

const PROJECT: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";
const SERVICE: &str = "9f6d8c9f-d22d-480e-80f5-867daa050ff8";
const EXTERNAL: &str = "1c4a8c2e-0f1e-4a4b-9d6e-2b7a9d3c5e11";

fn conf_file() -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    write!(
        file,
        "[kubernetes]\nl7_router_driver = neutron_l7_policy\n\
         [neutron]\nauth_type = noauth   # tests\nendpoint_override = http://127.0.0.1:9696\n\
         [octavia]\nendpoint_override = http://127.0.0.1:9876\n\
         [neutron_defaults]\nproject = {PROJECT}\nservice_subnet = {SERVICE}\n\
         external_svc_subnet = {EXTERNAL}\nfloating_ip = 172.24.4.14\n\
         [ingress]\nl7_router_uuid =\n"
    )
    .unwrap();
    file
}

const FLAGS: &[&str] = &[
    "--driver",
    "octavia",
    "--os-auth-type",
    "noauth",
    "--neutron-url",
    "http://127.0.0.1:9696",
    "--octavia-url",
    "http://127.0.0.1:9876",
    "--project",
    PROJECT,
    "--service-subnet",
    SERVICE,
    "--external-svc-subnet",
    EXTERNAL,
    "--floating-ip",
    "172.24.4.14",
];

#[test]
fn kuryr_conf_and_flags_give_equal_configurations() {
    let file = conf_file();
    let from_file = config(&["--config-file", file.path().to_str().unwrap()]);
    let from_flags = config(FLAGS);
    assert_eq!(from_file.driver, Driver::Octavia);
    assert_eq!(from_flags.driver, Driver::Octavia);
    assert_eq!(from_file.openstack, from_flags.openstack);
    let settings = from_file.openstack.unwrap();
    assert_eq!(
        settings.octavia.credentials,
        Credentials::NoAuth {
            project_id: PROJECT.to_owned()
        }
    );
    assert_eq!(
        settings.octavia.endpoint,
        Endpoint::Url("http://127.0.0.1:9876".to_owned())
    );
    assert_eq!(settings.node_name, "node-1");
    assert_eq!(settings.l7_router_uuid, None);
}

#[test]
fn a_flag_wins_over_the_file() {
    let file = conf_file();
    let path = file.path().to_str().unwrap();
    let other = "2d5b9d3f-1a2b-4c3d-8e9f-0a1b2c3d4e5f";
    let config = config(&[
        "--config-file",
        path,
        "--service-subnet",
        other,
        "--driver",
        "octavia",
    ]);
    let settings = config.openstack.unwrap();
    assert_eq!(settings.service_subnet.as_deref(), Some(other));
    assert_eq!(settings.external_svc_subnet.as_deref(), Some(EXTERNAL));
    let embedded = super::ControllerArgs::into_config(
        Cli::try_parse_from([
            "kuryr-l7",
            "--source",
            "dir:/tmp",
            "--config-file",
            path,
            "--driver",
            "embedded",
        ])
        .unwrap()
        .args,
    )
    .unwrap();
    assert_eq!(embedded.driver, Driver::Embedded);
    assert!(embedded.openstack.is_none());
}

#[test]
fn a_wrong_file_value_names_file_and_line() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    write!(file, "[kubernetes]\n\nl7_router_driver = nonsense\n").unwrap();
    let path = file.path().to_str().unwrap().to_owned();
    let error = Cli::try_parse_from(["kuryr-l7", "--source", "dir:/tmp", "--config-file", &path])
        .unwrap()
        .args
        .into_config()
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        format!(
            "{path}:3: [kubernetes] l7_router_driver: unknown driver \"nonsense\" \
             (expected embedded, haproxy, neutron_l7_policy or octavia)"
        )
    );
}
