//! A real kube-runtime `Controller` converges against the server: finalizer, status, deletion
//! and clean-up, also after the watch is forced to 410 and the watcher re-lists.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{self, Event, finalizer};
use kube::runtime::watcher;
use kube::{CustomResource, CustomResourceExt, Resource, ResourceExt};
use nephrite_test_apiserver::TestApiServer;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

const FINALIZER: &str = "widgets.test.nephrite.dev/cleanup";

/// A widget of some size.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "test.nephrite.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
pub struct WidgetSpec {
    size: i32,
}

/// What the controller observed.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
pub struct WidgetStatus {
    observed_size: i32,
    ready: bool,
}

struct Ctx {
    api: Api<Widget>,
    cleaned: Mutex<Vec<String>>,
}

async fn reconcile(w: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, finalizer::Error<kube::Error>> {
    let api = ctx.api.clone();
    finalizer(&api, FINALIZER, w, |event| async {
        match event {
            Event::Apply(w) => {
                let want = WidgetStatus {
                    observed_size: w.spec.size,
                    ready: true,
                };
                let have = w.status.as_ref();
                if have.is_none_or(|s| s.observed_size != want.observed_size || !s.ready) {
                    ctx.api
                        .patch_status(
                            &w.name_any(),
                            &PatchParams::default(),
                            &Patch::Merge(json!({"status": want})),
                        )
                        .await?;
                }
                Ok(Action::await_change())
            }
            Event::Cleanup(w) => {
                ctx.cleaned
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(w.name_any());
                Ok(Action::await_change())
            }
        }
    })
    .await
}

fn error_policy(_: Arc<Widget>, _: &finalizer::Error<kube::Error>, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

/// Polls `check` until it returns `Some`, failing after a generous deadline.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn converge_and_delete(
    server: &TestApiServer,
    api: &Api<Widget>,
    ctx: &Ctx,
    name: &str,
) -> anyhow::Result<()> {
    let mut w = Widget::new(name, WidgetSpec { size: 3 });
    w.meta_mut().namespace = Some("default".into());
    api.create(&PostParams::default(), &w).await?;

    let ready = eventually(
        &format!("{name} to get its finalizer and status"),
        || async {
            let w = api.get(name).await?;
            let done = w.finalizers().iter().any(|f| f == FINALIZER)
                && w.status
                    .as_ref()
                    .is_some_and(|s| s.ready && s.observed_size == 3);
            Ok(done.then_some(w))
        },
    )
    .await?;
    assert_eq!(
        ready.meta().generation,
        Some(1),
        "status writes must not bump generation"
    );

    // A spec change is observed and reflected in status.
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 5}})),
    )
    .await?;
    eventually(&format!("{name} status to follow the spec"), || async {
        let w = api.get(name).await?;
        Ok(w.status
            .as_ref()
            .is_some_and(|s| s.observed_size == 5)
            .then_some(()))
    })
    .await?;

    let deleted = api.delete(name, &DeleteParams::default()).await?;
    let pending = deleted
        .left()
        .context("delete of an object with a finalizer returns the object")?;
    assert!(
        pending.meta().deletion_timestamp.is_some(),
        "deletionTimestamp is set"
    );

    eventually(&format!("{name} to be cleaned up and gone"), || async {
        Ok(api.get_opt(name).await?.is_none().then_some(()))
    })
    .await?;
    let cleaned = ctx
        .cleaned
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    assert!(
        cleaned.iter().any(|n| n == name),
        "cleanup ran for {name}: {cleaned:?}"
    );
    let _ = server;
    Ok(())
}

#[tokio::test]
async fn controller_converges_and_survives_watch_expiry() -> anyhow::Result<()> {
    let server = TestApiServer::builder()
        .bookmark_interval(Duration::from_millis(200))
        .start()
        .await?;
    let client = server.client()?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.create(&PostParams::default(), &Widget::crd()).await?;
    let established = crd
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
    assert!(established, "the CRD is Established: {:?}", crd.status);

    let api: Api<Widget> = Api::namespaced(client.clone(), "default");
    let ctx = Arc::new(Ctx {
        api: api.clone(),
        cleaned: Mutex::new(Vec::new()),
    });
    let controller = tokio::spawn(
        Controller::new(api.clone(), watcher::Config::default())
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|_| async {}),
    );

    converge_and_delete(&server, &api, &ctx, "first").await?;

    // Break the open watch with 410 Expired and fail the next watch too: the watcher must
    // re-list (twice) and keep converging.
    let lists_before = server.requests().count("list", "widgets");
    server.faults().expire_next_watch("widgets");
    let ended = server.expire_watches("widgets");
    assert!(ended >= 1, "the controller had a widgets watch open");
    // While the watch is down, create an object: only a re-list can find it.
    converge_and_delete(&server, &api, &ctx, "second").await?;
    let lists_after = server.requests().count("list", "widgets");
    assert!(
        lists_after >= lists_before + 2,
        "the watcher re-listed after each 410 (lists {lists_before} → {lists_after})"
    );

    controller.abort();
    server.shutdown().await?;
    Ok(())
}
