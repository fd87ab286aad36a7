//! What a real cluster refuses is refused here too: invalid names, labels and annotations
//! (422 Invalid naming the field), bodies over 3 MiB (413), and unknown fields of custom
//! resources under `fieldValidation` (Strict: 400, Warn: a `Warning` header, Ignore: dropped).
//! The `/openapi/v3` documents kubectl reads are checked over HTTP here, and by kubectl itself
//! in `tests/kubectl.rs`.

mod support;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use nephrite_test_apiserver::TestApiServer;
use serde_json::{Value, json};

/// A response: status, `Warning` headers and the body as JSON (`null` if empty).
struct Answer {
    code: u16,
    warnings: Vec<String>,
    body: Value,
}

async fn send(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> anyhow::Result<Answer> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(kube::client::Body::from(body))?;
    let resp = client.send(req).await?;
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let bytes = resp.into_body().collect_bytes().await?;
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).with_context(|| format!("{method} {path}: not JSON"))?
    };
    Ok(Answer {
        code,
        warnings,
        body,
    })
}

async fn post(client: &Client, path: &str, body: &Value) -> anyhow::Result<Answer> {
    send(
        client,
        "POST",
        path,
        "application/json",
        serde_json::to_vec(body)?,
    )
    .await
}

/// Asserts a 422 Invalid whose message and first cause name `field` and `needle`.
fn assert_invalid(got: &Answer, field: &str, needle: &str) {
    let body = &got.body;
    assert_eq!(got.code, 422, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["reason"], "Invalid", "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("{field}: ")), "{message}");
    assert!(message.contains(needle), "{message:?} lacks {needle:?}");
    assert_eq!(body["details"]["causes"][0]["field"], field, "{body}");
}

const CM: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn names_are_validated_as_kubernetes_does() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let cm = |name: &str| json!({"metadata": {"name": name}, "data": {"k": "v"}});

    let got = post(&client, CM, &cm("Bad_Name!")).await?;
    assert_invalid(
        &got,
        "metadata.name",
        "Invalid value: \"Bad_Name!\": a lowercase RFC 1123 subdomain",
    );
    assert!(
        got.body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("ConfigMap \"Bad_Name!\" is invalid")),
        "{}",
        got.body
    );
    let long = "a".repeat(300);
    let got = post(&client, CM, &cm(&long)).await?;
    assert_invalid(&got, "metadata.name", "must be no more than 253 characters");
    let fine = "a".repeat(253);
    assert_eq!(post(&client, CM, &cm(&fine)).await?.code, 201);

    // Namespaces are RFC 1123 labels: no dots, at most 63 characters.
    let got = post(&client, "/api/v1/namespaces", &cm("team.a")).await?;
    assert_invalid(&got, "metadata.name", "a lowercase RFC 1123 label");
    let got = post(&client, "/api/v1/namespaces", &cm(&"n".repeat(64))).await?;
    assert_invalid(&got, "metadata.name", "must be no more than 63 characters");
    // Services are RFC 1035 labels: they start with a letter.
    let got = post(&client, "/api/v1/namespaces/default/services", &cm("1-svc")).await?;
    assert_invalid(&got, "metadata.name", "a DNS-1035 label");
    assert_eq!(
        post(&client, "/api/v1/namespaces/default/services", &cm("svc-1"))
            .await?
            .code,
        201
    );

    // A long generateName is cut so that the generated name stays a valid label length.
    let got = post(
        &client,
        CM,
        &json!({"metadata": {"generateName": format!("{}-", "g".repeat(100))}}),
    )
    .await?;
    assert_eq!(got.code, 201, "{}", got.body);
    assert_eq!(
        got.body["metadata"]["name"].as_str().map(str::len),
        Some(63)
    );

    // Nothing refused was written.
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let names: Vec<String> = cms
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&fine));
    Ok(())
}

#[tokio::test]
async fn labels_and_annotations_are_validated_on_every_write() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let got = post(
        &client,
        CM,
        &json!({"metadata": {"name": "a", "labels": {"bad key": "v"}}}),
    )
    .await?;
    assert_invalid(&got, "metadata.labels", "Invalid value: \"bad key\"");
    let got = post(
        &client,
        CM,
        &json!({"metadata": {"name": "a", "annotations": {"-x": "v"}}}),
    )
    .await?;
    assert_invalid(&got, "metadata.annotations", "Invalid value: \"-x\"");

    let created = post(
        &client,
        CM,
        &json!({"metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "web"}}}),
    )
    .await?;
    assert_eq!(created.code, 201, "{}", created.body);
    let got = send(
        &client,
        "PATCH",
        &format!("{CM}/a"),
        "application/merge-patch+json",
        serde_json::to_vec(&json!({"metadata": {"labels": {"tier": "front end"}}}))?,
    )
    .await?;
    assert_invalid(&got, "metadata.labels", "Invalid value: \"front end\"");
    let now = send(
        &client,
        "GET",
        &format!("{CM}/a"),
        "application/json",
        Vec::new(),
    )
    .await?;
    assert_eq!(
        now.body["metadata"]["resourceVersion"], created.body["metadata"]["resourceVersion"],
        "the refused patch wrote nothing"
    );
    // A label that is not a string is a decoding error, as in Kubernetes.
    let got = post(
        &client,
        CM,
        &json!({"metadata": {"name": "b", "labels": {"n": 1}}}),
    )
    .await?;
    assert_eq!(got.code, 400, "{}", got.body);
    assert_eq!(got.body["reason"], "BadRequest");
    Ok(())
}

#[tokio::test]
async fn bodies_over_3_mib_are_413() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut big = ConfigMap::default();
    big.metadata.name = Some("big".into());
    big.data = Some([("blob".to_string(), "x".repeat(4 * 1024 * 1024))].into());
    match cms.create(&PostParams::default(), &big).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (413, "RequestEntityTooLarge"));
            assert!(s.message.contains("limit is 3145728"), "{}", s.message);
        }
        other => anyhow::bail!("expected 413, got {other:?}"),
    }
    // The 10 MiB body of the issue, sent raw.
    let ten = format!(
        "{{\"metadata\":{{\"name\":\"ten\"}},\"data\":{{\"b\":\"{}\"}}}}",
        "y".repeat(10 * 1024 * 1024)
    );
    let got = send(&client, "POST", CM, "application/json", ten.into_bytes()).await?;
    assert_eq!(got.code, 413, "{}", got.body);
    assert_eq!(got.body["kind"], "Status");
    assert!(cms.get_opt("big").await?.is_none());
    assert!(cms.get_opt("ten").await?.is_none());
    // Just under the limit is accepted.
    big.data = Some([("blob".to_string(), "x".repeat(3 * 1024 * 1024 - 1024))].into());
    cms.create(&PostParams::default(), &big).await?;
    Ok(())
}

const GIZMOS: &str = "/apis/test.nephrite.dev/v1/namespaces/default/gizmos";

/// A server with the Gizmo CRD whose `spec` declares `spec_properties`.
async fn gizmo_server_with(spec_properties: Value) -> anyhow::Result<(TestApiServer, Client)> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let crd = support::gizmo_crd(
        true,
        Some(json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": spec_properties},
                "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
            },
        })),
    )?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await?;
    Ok((server, client))
}

async fn gizmo_server() -> anyhow::Result<(TestApiServer, Client)> {
    gizmo_server_with(json!({
        "size": {"type": "integer"},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    }))
    .await
}

fn gizmo(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "test.nephrite.dev/v1", "kind": "Gizmo",
           "metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn unknown_fields_follow_field_validation() -> anyhow::Result<()> {
    let (_server, client) = gizmo_server().await?;
    let with_foo = |name: &str| gizmo(name, json!({"size": 1, "foo": 2, "extra": {"kept": 3}}));

    // Strict: 400, nothing written.
    let got = post(
        &client,
        &format!("{GIZMOS}?fieldValidation=Strict"),
        &with_foo("s"),
    )
    .await?;
    assert_eq!(got.code, 400, "{}", got.body);
    assert_eq!(got.body["reason"], "BadRequest");
    assert_eq!(
        got.body["message"],
        "Gizmo in version \"v1\" cannot be handled as a Gizmo: strict decoding error: unknown field \"spec.foo\""
    );
    let missing = send(
        &client,
        "GET",
        &format!("{GIZMOS}/s"),
        "application/json",
        Vec::new(),
    )
    .await?;
    assert_eq!(missing.code, 404);

    // Warn (and no parameter at all, the server's default): accepted, pruned, one Warning.
    for (name, query) in [("w", "?fieldValidation=Warn"), ("d", "")] {
        let got = post(&client, &format!("{GIZMOS}{query}"), &with_foo(name)).await?;
        assert_eq!(got.code, 201, "{}", got.body);
        assert_eq!(got.warnings, [r#"299 - "unknown field \"spec.foo\"""#]);
        assert_eq!(got.body["spec"], json!({"size": 1, "extra": {"kept": 3}}));
    }

    let stored = support::gizmo_api(client.clone()).get("w").await?;
    assert_eq!(
        stored.data["spec"],
        json!({"size": 1, "extra": {"kept": 3}})
    );

    // Ignore: accepted, pruned, silent.
    let got = post(
        &client,
        &format!("{GIZMOS}?fieldValidation=Ignore"),
        &with_foo("i"),
    )
    .await?;
    assert_eq!(got.code, 201, "{}", got.body);
    assert!(got.warnings.is_empty(), "{:?}", got.warnings);
    assert_eq!(got.body["spec"].get("foo"), None);

    // Patches and status writes are checked the same way.
    let patch = |query: &str, path: &str, body: Value| {
        let client = client.clone();
        let path = format!("{GIZMOS}/{path}{query}");
        async move {
            send(
                &client,
                "PATCH",
                &path,
                "application/merge-patch+json",
                serde_json::to_vec(&body)?,
            )
            .await
        }
    };
    let got = patch("?fieldValidation=Strict", "i", json!({"spec": {"bar": 1}})).await?;
    assert_eq!(got.code, 400, "{}", got.body);
    assert!(
        got.body["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("unknown field \"spec.bar\"")),
        "{}",
        got.body
    );
    let got = patch(
        "?fieldValidation=Strict",
        "i/status",
        json!({"status": {"phase": "Ready", "mood": "good"}}),
    )
    .await?;
    assert_eq!(got.code, 400, "{}", got.body);
    let got = patch(
        "?fieldValidation=Strict",
        "i/status",
        json!({"status": {"phase": "Ready"}}),
    )
    .await?;
    assert_eq!(got.code, 200, "{}", got.body);
    assert_eq!(got.body["status"]["phase"], "Ready");

    // Unknown metadata fields are unknown fields of every kind.
    let got = post(
        &client,
        &format!("{CM}?fieldValidation=Strict"),
        &json!({"metadata": {"name": "m", "bogus": 1}}),
    )
    .await?;
    assert_eq!(got.code, 400, "{}", got.body);
    assert!(
        got.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown field \"metadata.bogus\"")),
        "{}",
        got.body
    );

    let got = post(
        &client,
        &format!("{GIZMOS}?fieldValidation=Loud"),
        &with_foo("x"),
    )
    .await?;
    assert_eq!(got.code, 400, "{}", got.body);
    Ok(())
}

#[tokio::test]
async fn openapi_v3_serves_the_crd_schema_kubectl_reads() -> anyhow::Result<()> {
    let (_server, client) = gizmo_server().await?;
    let root = send(
        &client,
        "GET",
        "/openapi/v3",
        "application/json",
        Vec::new(),
    )
    .await?;
    assert_eq!(root.code, 200);
    let url = root.body["paths"]["apis/test.nephrite.dev/v1"]["serverRelativeURL"]
        .as_str()
        .context("the CRD's group/version is listed")?
        .to_string();
    assert!(root.body["paths"]["api/v1"]["serverRelativeURL"].is_string());
    let doc = send(&client, "GET", &url, "application/json", Vec::new()).await?;
    assert_eq!(doc.code, 200);
    assert_eq!(doc.body["openapi"], "3.0.0");
    let schema = &doc.body["components"]["schemas"]["dev.nephrite.test.v1.Gizmo"];
    assert_eq!(
        schema["properties"]["spec"]["properties"]["size"]["type"],
        "integer"
    );
    assert_eq!(
        schema["x-kubernetes-group-version-kind"][0]["kind"],
        "Gizmo"
    );
    let patch = &doc.body["paths"]["/apis/test.nephrite.dev/v1/namespaces/{namespace}/gizmos/{name}"]
        ["patch"];
    assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Gizmo");
    assert!(
        patch["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["name"] == "fieldValidation" && p["in"] == "query"),
        "{patch}"
    );
    let gone = send(
        &client,
        "GET",
        "/openapi/v3/apis/nope.example.com/v1",
        "application/json",
        Vec::new(),
    )
    .await?;
    assert_eq!(gone.code, 404);
    Ok(())
}

/// A Gizmo CRD whose schema carries value constraints of every kind the server checks.
async fn constrained_gizmo_server() -> anyhow::Result<(TestApiServer, Client)> {
    gizmo_server_with(json!({
        "mode": {"type": "string", "enum": ["ETHERNET_VIRTUALIZER", "FNN"]},
        "cidr": {"type": "string", "format": "cidr"},
        "name": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "maxLength": 12},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 5},
        "tags": {"type": "array", "maxItems": 2, "items": {"type": "string", "minLength": 1}},
        "port": {"x-kubernetes-int-or-string": true},
    }))
    .await
}

#[tokio::test]
async fn schema_value_constraints_are_enforced_on_every_write() -> anyhow::Result<()> {
    let (_server, client) = constrained_gizmo_server().await?;
    let good = json!({"mode": "FNN", "cidr": "10.0.0.0/24", "name": "edge-1",
                      "replicas": 3, "tags": ["a"], "port": "https"});
    let got = post(&client, GIZMOS, &gizmo("good", good.clone())).await?;
    assert_eq!(got.code, 201, "{}", got.body);

    // Every broken constraint is named in one 422, nothing is stored.
    let bad = json!({"mode": "VLAN", "cidr": "10.0.0.0/33", "name": "Edge_1",
                     "replicas": 9, "tags": ["a", "", "c"], "port": true});
    let got = post(&client, GIZMOS, &gizmo("bad", bad)).await?;
    assert_invalid(
        &got,
        "spec.mode",
        "Unsupported value: \"VLAN\": supported values: \"ETHERNET_VIRTUALIZER\", \"FNN\"",
    );
    let message = got.body["message"].as_str().unwrap_or_default();
    for needle in [
        "spec.cidr: Invalid value: \"10.0.0.0/33\": spec.cidr in body must be of type cidr",
        "spec.name: Invalid value: \"Edge_1\": spec.name in body should match '^[a-z][a-z0-9-]*$'",
        "spec.replicas: Invalid value: 9: spec.replicas in body should be less than or equal to 5",
        "spec.tags: Too many: 3: must have at most 2 items",
        "spec.tags[1]: Invalid value: \"\": spec.tags[1] in body should be at least 1 chars long",
        "spec.port: Invalid value: true: spec.port in body must be of type integer,string",
    ] {
        assert!(message.contains(needle), "{message:?} lacks {needle:?}");
    }
    let reasons: Vec<&str> = got.body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["reason"].as_str())
        .collect();
    assert!(reasons.contains(&"FieldValueNotSupported"), "{reasons:?}");
    assert!(reasons.contains(&"FieldValueTooMany"), "{reasons:?}");
    let missing = send(
        &client,
        "GET",
        &format!("{GIZMOS}/bad"),
        "application/json",
        Vec::new(),
    )
    .await?;
    assert_eq!(missing.code, 404);

    // A patch that breaks a constraint is refused and the stored object is unchanged.
    let got = send(
        &client,
        "PATCH",
        &format!("{GIZMOS}/good"),
        "application/merge-patch+json",
        serde_json::to_vec(&json!({"spec": {"replicas": 0}}))?,
    )
    .await?;
    assert_invalid(
        &got,
        "spec.replicas",
        "should be greater than or equal to 1",
    );
    let stored = send(
        &client,
        "GET",
        &format!("{GIZMOS}/good"),
        "application/json",
        Vec::new(),
    )
    .await?;
    assert_eq!(stored.body["spec"], good);
    Ok(())
}

#[tokio::test]
async fn a_crd_with_an_invalid_pattern_is_refused() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let crd = support::gizmo_crd(
        true,
        Some(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "name": {"type": "string", "pattern": "([a-z"},
            }}}}),
        ),
    )?;
    let got = post(
        &client,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &serde_json::to_value(&crd)?,
    )
    .await?;
    assert_invalid(
        &got,
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[name].pattern",
        "must be a valid regular expression",
    );
    Ok(())
}
