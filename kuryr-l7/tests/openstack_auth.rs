//! The session's Keystone v3 authentication against the real Keystone 30
//! (`nephrite_test_services::Keystone`): a password token scoped by project name, the catalog
//! endpoint it carries, a revoked token re-issued on the 401 it earns, an application
//! credential's token, and a wrong password refused as a non-retryable error.
//!
//! One `#[test]`: under nextest each test is a process, and each would start Keystone.

use std::time::Duration;

use anyhow::{Context, ensure};
use nephrite_kuryr_l7::openstack::auth::{Credentials, ProjectScope};
use nephrite_kuryr_l7::openstack::{ApiError, Endpoint, Session};
use nephrite_test_services::Keystone;
use reqwest::Method;
use serde_json::{Value, json};

#[test]
fn keystone_tokens_for_password_and_application_credentials() -> anyhow::Result<()> {
    let keystone = match Keystone::start() {
        Ok(keystone) => keystone,
        Err(e) => {
            e.skip("keystone_tokens_for_password_and_application_credentials");
            return Ok(());
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(scenarios(&keystone))
}

async fn scenarios(keystone: &Keystone) -> anyhow::Result<()> {
    let auth_url = keystone.auth_url();
    let password = |password: &str| Credentials::Password {
        auth_url: auth_url.clone(),
        username: keystone.admin_user().to_owned(),
        password: password.to_owned(),
        user_domain_name: "Default".to_owned(),
        project: ProjectScope::Name {
            name: "admin".to_owned(),
            domain_name: "Default".to_owned(),
        },
    };
    let session = Session::new(password(keystone.admin_password()), Duration::from_secs(30))?;

    // A password token scoped to the admin project, with the catalog.
    let token = session.token().await.context("password token")?;
    let project = session.project_id().await?;
    ensure!(
        project == token.project_id && project.len() == 32,
        "{project}"
    );
    let identity = session.url_of(&Endpoint::public("identity")).await?;
    ensure!(identity == auth_url, "catalog: {identity}");
    let regional = Endpoint::Catalog {
        service_type: "identity".to_owned(),
        interface: "internal".to_owned(),
        region: Some("RegionOne".to_owned()),
    };
    ensure!(session.url_of(&regional).await? == auth_url);
    let missing = session
        .url_of(&Endpoint::public("load-balancer"))
        .await
        .expect_err("no Octavia in this catalog");
    ensure!(matches!(missing, ApiError::NoEndpoint { .. }), "{missing}");
    let same = session.token().await?;
    ensure!(same.value == token.value, "a valid token is reused");

    // A revoked token: the next call answers 401, the session issues a new token and resends.
    let projects_url = format!("{auth_url}/projects");
    session
        .send(Method::GET, projects_url.clone(), None)
        .await?
        .success()?;
    let revoked = reqwest::Client::new()
        .delete(format!("{auth_url}/auth/tokens"))
        .header("X-Auth-Token", &token.value)
        .header("X-Subject-Token", &token.value)
        .send()
        .await?;
    ensure!(
        revoked.status().as_u16() == 204,
        "revoked: {}",
        revoked.status()
    );
    let answer = session
        .send(Method::GET, projects_url.clone(), None)
        .await?
        .success()
        .context("the call after revocation")?;
    let listed: Value = answer.json()?;
    ensure!(
        listed["projects"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["id"] == project.as_str())),
        "{listed}"
    );
    let renewed = session.token().await?;
    ensure!(
        renewed.value != token.value,
        "a new token replaced the revoked one"
    );

    // An application credential of the admin user: its token is scoped to the same project.
    let users: Value = session
        .send(Method::GET, format!("{auth_url}/users?name=admin"), None)
        .await?
        .success()?
        .json()?;
    let user_id = users["users"][0]["id"]
        .as_str()
        .context("the admin user")?
        .to_owned();
    let created: Value = session
        .send(
            Method::POST,
            format!("{auth_url}/users/{user_id}/application_credentials"),
            Some(&json!({"application_credential": {"name": "kuryr-l7"}})),
        )
        .await?
        .success()?
        .json()?;
    let credential = &created["application_credential"];
    let application = Session::new(
        Credentials::ApplicationCredential {
            auth_url: auth_url.clone(),
            id: credential["id"].as_str().context("id")?.to_owned(),
            secret: credential["secret"].as_str().context("secret")?.to_owned(),
        },
        Duration::from_secs(30),
    )?;
    ensure!(application.project_id().await? == project);
    application
        .send(Method::GET, projects_url, None)
        .await?
        .success()?;

    // A wrong password: Keystone's 401, named, not worth retrying.
    let wrong = Session::new(password("not-the-password"), Duration::from_secs(30))?;
    let refused = wrong.token().await.expect_err("wrong password");
    ensure!(
        matches!(
            refused,
            ApiError::Auth {
                status: Some(401),
                ..
            }
        ) && !refused.is_retryable(),
        "{refused}"
    );
    ensure!(
        refused
            .to_string()
            .starts_with(&format!("Keystone {auth_url}/auth/tokens: ")),
        "{refused}"
    );
    Ok(())
}
