//! What a test's API server holds, as the controller must translate it.

use kube::api::{Api, DynamicObject, ListParams};
use nephrite_kuryr_l7::kubernetes::watch::kinds;
use nephrite_l7::{Options, SourceObject, Translation, translate};

/// The translation of every kind the controller watches, read from the API server of `client`
/// (a kind the server does not serve is skipped, as the controller skips it).
pub async fn translation(client: &kube::Client) -> anyhow::Result<Translation> {
    let mut objects = Vec::new();
    for kind in kinds() {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.resource);
        let mut params = ListParams::default();
        if let Some(fields) = kind.field_selector {
            params = params.fields(fields);
        }
        let Ok(list) = api.list(&params).await else {
            continue;
        };
        for mut item in list.items {
            item.types = Some(kube::api::TypeMeta {
                api_version: kind.resource.api_version.clone(),
                kind: kind.resource.kind.clone(),
            });
            objects.push(SourceObject {
                object: item.try_into()?,
                origin: "kube".into(),
            });
        }
    }
    Ok(translate(&objects, &Options::default()))
}
