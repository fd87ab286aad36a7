use super::*;

/// The test configuration against the local services.
const LOCAL: &str = "\
[kubernetes]
l7_router_driver = neutron_l7_policy
[neutron]
auth_type = noauth            # or password / v3applicationcredential with auth_url, …
endpoint_override = http://127.0.0.1:9696
[octavia]
endpoint_override = http://127.0.0.1:9876
[neutron_defaults]
project = 0123456789abcdef0123456789abcdef
service_subnet = 9f6d8c9f-d22d-480e-80f5-867daa050ff8
external_svc_subnet = 04967200-33b6-4614-a489-805d508a65ae
[ingress]
l7_router_uuid =              # empty: create the Router LB
";

fn parsed(text: &str) -> Loaded {
    parse("kuryr.conf", text).unwrap_or_else(|e| panic!("{e}"))
}

fn refused(text: &str) -> String {
    parse("kuryr.conf", text)
        .expect_err("the file is refused")
        .to_string()
}

#[test]
fn the_local_test_configuration_reads_as_noauth_with_endpoint_overrides() {
    let loaded = parsed(LOCAL);
    assert_eq!(loaded.warnings, []);
    let conf = loaded.conf;
    assert_eq!(
        conf.kubernetes.l7_router_driver,
        Some(RouterDriver::NeutronL7Policy)
    );
    assert_eq!(
        conf.neutron_defaults.service_subnet.as_deref(),
        Some("9f6d8c9f-d22d-480e-80f5-867daa050ff8")
    );
    assert_eq!(conf.ingress.l7_router_uuid, None, "empty means unset");
    let noauth = Credentials::NoAuth {
        project_id: "0123456789abcdef0123456789abcdef".to_owned(),
    };
    assert_eq!(conf.neutron_credentials(), Some(noauth.clone()));
    assert_eq!(
        conf.octavia_credentials(),
        Some(noauth),
        "[octavia] without auth_type authenticates as [neutron]"
    );
    assert_eq!(
        conf.neutron_endpoint(),
        Endpoint::Url("http://127.0.0.1:9696".to_owned())
    );
    assert_eq!(
        conf.octavia_endpoint(),
        Endpoint::Url("http://127.0.0.1:9876".to_owned())
    );
}

#[test]
fn a_wrong_value_names_file_line_section_and_option() {
    let text = "[DEFAULT]\n\n[kubernetes]\nl7_router_driver = nonsense\n";
    assert_eq!(
        refused(text),
        "kuryr.conf:4: [kubernetes] l7_router_driver: unknown driver \"nonsense\" \
         (expected embedded, haproxy, neutron_l7_policy or octavia)"
    );
    assert_eq!(
        refused("[neutron_defaults]\nservice_subnet = subnet-1\n"),
        "kuryr.conf:2: [neutron_defaults] service_subnet: not an OpenStack id (a UUID): \"subnet-1\""
    );
    assert_eq!(
        refused("[neutron_defaults]\nfloating_ip = 172.24.4.300\n"),
        "kuryr.conf:2: [neutron_defaults] floating_ip: not an IP address: \"172.24.4.300\""
    );
    assert_eq!(
        refused("[octavia]\nendpoint_override = 127.0.0.1:9876\n"),
        "kuryr.conf:2: [octavia] endpoint_override: not an http(s) URL: \"127.0.0.1:9876\""
    );
    assert_eq!(
        refused("[neutron]\nauth_type = kerberos\n"),
        "kuryr.conf:2: [neutron] auth_type: unknown auth_type \"kerberos\" \
         (expected noauth, password or v3applicationcredential)"
    );
    assert_eq!(
        refused("[neutron]\nvalid_interfaces = private\n"),
        "kuryr.conf:2: [neutron] valid_interfaces: unknown interface \"private\" \
         (expected public, internal or admin)"
    );
    assert_eq!(
        refused("[ingress]\nl7_router_uuid = 90732f0a-651a-4b17-a14e\n"),
        "kuryr.conf:2: [ingress] l7_router_uuid: not an OpenStack id (a UUID): \
         \"90732f0a-651a-4b17-a14e\""
    );
}

#[test]
fn unknown_sections_and_options_are_warnings_naming_file_and_line() {
    let loaded = parsed(
        "[DEFAULT]\ndebug = true\n[kubernetes]\nl7_router_driver = haproxy\n\
         pod_vif_driver = nested-vlan\n[vif_pool]\nports_pool_max = 0\n",
    );
    assert_eq!(
        loaded.conf.kubernetes.l7_router_driver,
        Some(RouterDriver::Haproxy)
    );
    let shown: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "kuryr.conf:2: [DEFAULT] debug: unknown option (ignored)",
            "kuryr.conf:5: [kubernetes] pod_vif_driver: unknown option (ignored)",
            "kuryr.conf:6: unknown section [vif_pool] (ignored)",
        ]
    );
}

#[test]
fn inline_comments_with_hash_or_semicolon_are_stripped() {
    let conf = parsed(
        "[kubernetes]\nl7_router_driver = octavia ; the seed's neutron_l7_policy\n\
         enabled_vif_drivers = sriov, additional_subnets # multi-VIF\n",
    )
    .conf;
    assert_eq!(
        conf.kubernetes.l7_router_driver,
        Some(RouterDriver::NeutronL7Policy)
    );
    assert_eq!(
        conf.kubernetes.enabled_vif_drivers,
        ["sriov", "additional_subnets"]
    );
}

#[test]
fn an_empty_value_means_unset() {
    let conf = parsed(
        "[kubernetes]\nl7_router_driver =\nenabled_vif_drivers =\n[neutron_defaults]\n\
         floating_ip = \nproject =\n[neutron]\nendpoint_override =\n",
    )
    .conf;
    assert_eq!(conf, KuryrConf::default());
}

#[test]
fn the_last_assignment_wins_and_is_the_line_reported() {
    let conf =
        parsed("[kubernetes]\nl7_router_driver = haproxy\nl7_router_driver = embedded\n").conf;
    assert_eq!(
        conf.kubernetes.l7_router_driver,
        Some(RouterDriver::Embedded)
    );
    assert_eq!(
        refused("[kubernetes]\nl7_router_driver = haproxy\n\nl7_router_driver = bad\n"),
        "kuryr.conf:4: [kubernetes] l7_router_driver: unknown driver \"bad\" \
         (expected embedded, haproxy, neutron_l7_policy or octavia)"
    );
}

#[test]
fn password_auth_reads_keystoneauths_option_names() {
    let conf = parsed(
        "[neutron]\nauth_type = password\nauth_url = http://keystone:5000/v3/\n\
         username = kuryr\npassword = pa\\ss#word\nuser_domain_name = Users\n\
         project_name = k8s\nproject_domain_name = Projects\nregion_name = RegionOne\n\
         valid_interfaces = internal, public\n",
    )
    .conf;
    assert_eq!(
        conf.neutron_credentials(),
        Some(Credentials::Password {
            auth_url: "http://keystone:5000/v3".to_owned(),
            username: "kuryr".to_owned(),
            password: "pa\\ss#word".to_owned(),
            user_domain_name: "Users".to_owned(),
            project: ProjectScope::Name {
                name: "k8s".to_owned(),
                domain_name: "Projects".to_owned(),
            },
        })
    );
    assert_eq!(
        conf.neutron_endpoint(),
        Endpoint::Catalog {
            service_type: "network".to_owned(),
            interface: "internal".to_owned(),
            region: Some("RegionOne".to_owned()),
        }
    );
    assert!(!format!("{conf:?}").contains("pa\\\\ss"), "{conf:?}");
}

#[test]
fn application_credentials_and_a_separate_octavia_identity() {
    let conf = parsed(
        "[neutron]\nauth_type = noauth\nendpoint_override = http://n:9696\nproject_id = p1\n\
         [octavia]\nauth_type = v3applicationcredential\nauth_url = https://k/identity\n\
         application_credential_id = ac1\napplication_credential_secret = s\n",
    )
    .conf;
    assert_eq!(
        conf.neutron_credentials(),
        Some(Credentials::NoAuth {
            project_id: "p1".to_owned()
        })
    );
    assert_eq!(
        conf.octavia_credentials(),
        Some(Credentials::ApplicationCredential {
            auth_url: "https://k/identity".to_owned(),
            id: "ac1".to_owned(),
            secret: "s".to_owned(),
        })
    );
    assert_eq!(conf.octavia_endpoint(), Endpoint::public("load-balancer"));
}

#[test]
fn an_auth_type_missing_its_options_is_an_error_at_auth_type() {
    assert_eq!(
        refused("[neutron]\n\nauth_type = password\nauth_url = http://k:5000\nusername = u\n"),
        "kuryr.conf:3: [neutron] auth_type: password needs password, project_id or \
         project_name (not set)"
    );
    assert_eq!(
        refused("[octavia]\nauth_type = v3applicationcredential\nauth_url = http://k\n"),
        "kuryr.conf:2: [octavia] auth_type: v3applicationcredential needs \
         application_credential_id, application_credential_secret (not set)"
    );
    assert_eq!(
        refused("[neutron]\nauth_type = noauth\n"),
        "kuryr.conf:2: [neutron] auth_type: noauth needs endpoint_override (there is no \
         catalog without Keystone), project_id (or [neutron_defaults] project) (not set)"
    );
}

#[test]
fn syntax_errors_and_unreadable_files_name_the_file() {
    let error = refused("[kubernetes\nl7_router_driver = haproxy\n");
    assert!(error.starts_with("kuryr.conf:"), "{error}");
    let missing = load(Path::new("/nonexistent/kuryr.conf")).unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("/nonexistent/kuryr.conf: cannot read:"),
        "{missing}"
    );
}

#[test]
fn ids_may_come_with_or_without_hyphens() {
    assert!(uuid(Some("9f6d8c9fd22d480e80f5867daa050ff8")).is_ok());
    assert!(uuid(Some("9f6d8c9f-d22d-480e-80f5-867daa050ff8")).is_ok());
    assert!(uuid(Some("9f6d8c9f-d22d480e-80f5-867daa050ff8")).is_err());
    assert!(uuid(Some("zz6d8c9fd22d480e80f5867daa050ff8")).is_err());
    assert!(project_id(Some("a b")).is_err());
}

#[test]
fn line_index_finds_sections_and_the_last_assignment() {
    let index = LineIndex::new("top = 1\n[a]\n; c\nx = 1\nx: 2\n[b]\n[a]\ny=3\n");
    assert_eq!(index.option("DEFAULT", "top"), 1);
    assert_eq!(index.section("a"), 2);
    assert_eq!(index.option("a", "x"), 5);
    assert_eq!(index.option("a", "y"), 8);
    assert_eq!(
        index.option("b", "z"),
        6,
        "an absent option points at its section"
    );
    assert_eq!(index.section("zzz"), 0);
}
