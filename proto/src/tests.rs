use super::*;

#[test]
fn descriptor_set_names_every_nephrite_service_and_message() {
    let fds = file_descriptor_set().expect("embedded descriptor set decodes");
    let files: Vec<&str> = fds.file.iter().filter_map(|f| f.name.as_deref()).collect();
    assert!(files.contains(&"nephrite/krm/v1/krm.proto"), "{files:?}");
    assert!(
        files.contains(&"nephrite/daemon/v1/daemon.proto"),
        "{files:?}"
    );
    // imports are included so reflection clients can resolve Timestamp
    assert!(
        files.contains(&"google/protobuf/timestamp.proto"),
        "{files:?}"
    );

    let daemon = fds
        .file
        .iter()
        .find(|f| f.package.as_deref() == Some("nephrite.daemon.v1"))
        .expect("daemon package present");
    let services: Vec<&str> = daemon
        .service
        .iter()
        .filter_map(|s| s.name.as_deref())
        .collect();
    assert_eq!(services, ["Daemon"]);
}

#[test]
fn krm_package_round_trips_in_order() {
    use prost::Message;
    let gvk = krm_v1::GroupVersionKind {
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
    };
    let objects = ["a", "b", "c"].map(|name| krm_v1::Object {
        json: format!(
            r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}"}}}}"#
        ),
        gvk: Some(gvk.clone()),
        namespace: "default".into(),
        name: name.into(),
    });
    let package = krm_v1::Package {
        objects: objects.to_vec(),
    };
    let decoded = krm_v1::Package::decode(package.encode_to_vec().as_slice()).expect("decodes");
    let names: Vec<&str> = decoded.objects.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(decoded, package);
}

#[test]
fn daemon_service_has_generated_client_and_server() {
    use tonic::server::NamedService;
    struct Info;
    #[tonic::async_trait]
    impl daemon_v1::daemon_server::Daemon for Info {
        async fn get_info(
            &self,
            _request: tonic::Request<daemon_v1::GetInfoRequest>,
        ) -> Result<tonic::Response<daemon_v1::DaemonInfo>, tonic::Status> {
            Ok(tonic::Response::new(daemon_v1::DaemonInfo::default()))
        }
    }
    assert_eq!(
        <daemon_v1::daemon_server::DaemonServer<Info> as NamedService>::NAME,
        "nephrite.daemon.v1.Daemon"
    );
    // the client type exists for any tonic transport
    let _ =
        std::any::type_name::<daemon_v1::daemon_client::DaemonClient<tonic::transport::Channel>>();
}
