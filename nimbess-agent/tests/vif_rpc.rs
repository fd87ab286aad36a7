//! `nimbess.cni.v1.Vifs` on the agent's socket, through `VifClient`, as kuryr-l7's VIF handler
//! calls it: the agent binary on the sim driver, killed with SIGKILL and restarted on its state.
//! Each VIF gets its address and its own MAC at allocation, and keeps both across the restart.

mod support;

use nimbess_client::vif::{VifClaim, VifRef};
use nimbess_client::{VifCallError, VifClient};
use support::AgentProcess;

const CONFIG: &str = "driver: sim\nnetworks:\n  - name: blue\n    subnet: 10.50.0.0/29\n  - name: red\n    subnet: 10.51.0.0/24\n";

fn claim(uid: &str, key: &str, network: &str) -> VifClaim {
    VifClaim {
        vif: VifRef {
            pod_uid: uid.into(),
            key: key.into(),
        },
        network: network.into(),
        pod_namespace: "shop".into(),
        pod_name: "web".into(),
    }
}

#[test]
fn vifs_over_the_socket_are_idempotent_named_when_refused_and_survive_kill_9() {
    let mut agent = AgentProcess::start(CONFIG, "sim", &[]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = VifClient::new(&agent.socket);
    let (mac_a, mac_b) = runtime.block_on(async {
        let a = client
            .allocate(&claim("u1", "main", "blue"))
            .await
            .expect("a");
        assert_eq!(a.entry.address.to_string(), "10.50.0.2/29");
        assert_eq!(a.gateway, Some("10.50.0.1".parse().expect("ip")));
        assert_eq!(
            client
                .allocate(&claim("u1", "main", "blue"))
                .await
                .expect("again"),
            a
        );
        let b = client
            .allocate(&claim("u1", "network/shop/red/0", "red"))
            .await
            .expect("b");
        assert_eq!(b.entry.address.to_string(), "10.51.0.2/24");
        // Each VIF has its own MAC from the start, reserved before anything is plugged.
        let (mac_a, mac_b) = (a.entry.mac.expect("a's MAC"), b.entry.mac.expect("b's MAC"));
        assert_ne!(mac_a, mac_b);
        assert_eq!(mac_a.0[0], nimbess_agent::vif::VIF_MAC_PREFIX);
        assert!(a.plugged.is_none());

        match client.allocate(&claim("u1", "x", "green")).await {
            Err(VifCallError::NotFound(msg)) => assert!(msg.contains("\"green\""), "{msg}"),
            other => panic!("expected NOT_FOUND naming green, got {other:?}"),
        }
        match client.allocate(&claim("u1", "main", "red")).await {
            Err(VifCallError::Invalid(msg)) => {
                assert!(msg.contains("blue") && msg.contains("red"), "{msg}")
            }
            other => panic!("expected INVALID_ARGUMENT, got {other:?}"),
        }
        match client.allocate(&claim("", "main", "blue")).await {
            Err(e @ VifCallError::Invalid(_)) => assert!(!e.is_retryable()),
            other => panic!("expected INVALID_ARGUMENT, got {other:?}"),
        }
        let unknown = VifRef {
            pod_uid: "u9".into(),
            key: "main".into(),
        };
        assert_eq!(client.get(&unknown).await.expect("get"), None);
        assert!(!client.release(&unknown).await.expect("release unknown"));
        (mac_a, mac_b)
    });

    agent.kill9();
    // while the agent is down the call fails as retryable
    let down = runtime.block_on(client.list(None));
    assert!(
        down.as_ref().is_err_and(VifCallError::is_retryable),
        "{down:?}"
    );
    agent.spawn();

    runtime.block_on(async {
        let all = client.list(None).await.expect("list");
        let macs: Vec<_> = all.iter().map(|v| v.entry.mac).collect();
        assert_eq!(macs, [Some(mac_a), Some(mac_b)], "MACs survive kill -9");
        let keys: Vec<(&str, &str, String)> = all
            .iter()
            .map(|v| {
                (
                    v.entry.vif.pod_uid.as_str(),
                    v.entry.vif.key.as_str(),
                    v.entry.address.to_string(),
                )
            })
            .collect();
        assert_eq!(
            keys,
            [
                ("u1", "main", "10.50.0.2/29".to_string()),
                ("u1", "network/shop/red/0", "10.51.0.2/24".to_string())
            ]
        );
        assert!(
            all.iter()
                .all(|v| v.plugged.is_none() && v.entry.pod_name == "web")
        );
        // another pod's VIF is not listed with u1's; released, its address is handed out again
        client
            .allocate(&claim("u2", "main", "blue"))
            .await
            .expect("u2");
        assert_eq!(client.list(Some("u1")).await.expect("u1").len(), 2);
        let main = VifRef {
            pod_uid: "u1".into(),
            key: "main".into(),
        };
        assert!(client.release(&main).await.expect("release"));
        assert_eq!(client.get(&main).await.expect("get"), None);
        let next = client
            .allocate(&claim("u3", "main", "blue"))
            .await
            .expect("u3");
        assert_eq!(next.entry.address.to_string(), "10.50.0.2/29");
    });
}

/// With the agent requiring credentials, the VIF client presents them: refused without, with a
/// wrong token and with another role's (the agent's reason and where credentials go), an
/// unreadable token file named; allowed with the `vif` role's token.
#[test]
fn vif_calls_present_credentials_and_name_a_refusal() {
    let secrets = tempfile::tempdir().expect("tempdir");
    let agent = AgentProcess::start_with_auth(
        CONFIG,
        secrets.path(),
        "vif-token,kuryr\nread-token,ops\n",
        "identities:\n  kuryr: [vif]\n  ops: [read]\n",
    );
    let with_token = |token: Option<&str>, name: &str| {
        let token_file = token.map(|t| support::write(secrets.path(), name, &format!("{t}\n")));
        VifClient::with_credentials(
            &agent.socket,
            nephrite_runtime::ClientArgs {
                token_file,
                ..Default::default()
            },
        )
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let wanted = claim("u7", "main", "blue");
        for (client, reason) in [
            (VifClient::new(&agent.socket), "credentials are required"),
            (
                with_token(Some("guess"), "wrong"),
                "the bearer token is not valid",
            ),
            (
                with_token(Some("read-token"), "read"),
                "ops (roles: read) may not call /nimbess.cni.v1.Vifs/AllocateVif",
            ),
        ] {
            match client.allocate(&wanted).await {
                Err(e @ VifCallError::Refused(_)) => {
                    let said = e.to_string();
                    assert!(
                        said.contains(reason) && said.contains("--token-file"),
                        "{said}"
                    );
                    assert!(e.is_retryable(), "a rotated token or a granted role helps");
                }
                other => panic!("expected a refusal naming {reason:?}, got {other:?}"),
            }
        }
        let absent = VifClient::with_credentials(
            &agent.socket,
            nephrite_runtime::ClientArgs {
                token_file: Some(secrets.path().join("absent.token")),
                ..Default::default()
            },
        );
        match absent.allocate(&wanted).await {
            Err(e @ VifCallError::Credentials(_)) => {
                assert!(e.to_string().contains("absent.token"), "{e}")
            }
            other => panic!("expected the token file named, got {other:?}"),
        }
        let allowed = with_token(Some("vif-token"), "vif");
        let vif = allowed
            .allocate(&wanted)
            .await
            .expect("the vif role allocates");
        assert_eq!(vif.entry.address.to_string(), "10.50.0.2/29");
        assert!(allowed.release(&wanted.vif).await.expect("release"));
    });
}
