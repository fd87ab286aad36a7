//! The preparation loop: wakes on every change (and on an interval, for changes made by other
//! daemons on the same database), takes each unprepared deployment under a modification lease
//! (renewed while preparers run, so it never expires under a live preparer), prepares its
//! preparable resources in package order — built-in topology preparers in-process, plugins
//! over gRPC with a timeout, a Placement's sites chosen by its scheduling plugins
//! (`scheduling.rs`) — and marks the package prepared (and approved, by the approve
//! rules) when nothing preparable is left and its validation plugins accept it. A failure or
//! a validator's refusal is recorded on the deployment (`error` in list rows,
//! `Prepared=False` on the Deployment resource) and retried with exponential backoff; other
//! deployments carry on.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use nephrite_krm::{Gvk, Package, keys};
use nephrite_merge::metadata::{extract_metadata, overlay};
use nephrite_merge::{Approval, DeploymentResource, preparable_resources};
use nephrite_runtime::ShutdownHandle;

use crate::api::Changes;
use crate::clock::{now_ms, now_text};
use crate::plugins::PreparerSet;
use crate::store::{DeploymentRecord, DeploymentUpdate, Store, StoreError};

mod builtin;
mod plugin;
mod scheduling;
mod validation;

/// How the loop behaves.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    /// Approve prepared deployments whose approve mode is `Default`.
    pub auto_approve: bool,
    /// Poll interval (the loop also wakes on every local change).
    pub interval: Duration,
    /// Time a plugin gets per call.
    pub plugin_timeout: Duration,
    /// Modification lease; renewed every third of it while preparing.
    pub lease: Duration,
    /// First retry delay after a failure (doubles per failure).
    pub backoff: Duration,
    /// Longest retry delay.
    pub max_backoff: Duration,
    /// Deployments prepared at once.
    pub concurrency: usize,
    /// The Data API endpoint handed to plugins.
    pub data_endpoint: String,
    /// The credentials presented to plugins.
    pub plugin_credentials: nephrite_runtime::ClientArgs,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            auto_approve: true,
            interval: Duration::from_secs(3),
            plugin_timeout: Duration::from_secs(30),
            lease: Duration::from_secs(30),
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            concurrency: 4,
            data_endpoint: String::new(),
            plugin_credentials: nephrite_runtime::ClientArgs::default(),
        }
    }
}

/// What one preparer did with one resource.
pub(crate) enum Outcome {
    /// Prepared; the new package.
    Prepared(Package),
    /// Not possible yet (e.g. a merge source is still unprepared); try again later.
    NotReady(String),
}

/// What a preparer step may use.
pub(crate) struct PassContext<'a> {
    store: &'a dyn Store,
    preparers: &'a PreparerSet,
    has_preparer: &'a (dyn Fn(&Gvk) -> bool + Sync),
    has_validator: &'a (dyn Fn(&Gvk) -> bool + Sync),
    auto_approve: bool,
    now: &'a str,
    lookups: &'a builtin::Lookups,
    /// How Placements' scheduling plugins are called.
    scheduling: &'a scheduling::SchedulerCall<'a>,
}

/// The loop.
pub struct PreparationLoop {
    store: Arc<dyn Store>,
    changes: Changes,
    config: LoopConfig,
}

/// How often the change log is compacted.
const COMPACT_EVERY: Duration = Duration::from_secs(10);
/// Changes the log keeps (older revisions answer OUT_OF_RANGE to `Watch`).
const CHANGES_KEPT: i64 = 100_000;

/// The author of the loop's writes in deployments' histories.
pub(crate) const AUTHOR: &str = "preparer";

/// Rounds over one package before giving up for this pass (each round prepares at least one
/// resource, so this bounds preparers that keep adding preparable resources).
const MAX_ROUNDS: usize = 64;

impl PreparationLoop {
    /// A loop over `store`, woken by `changes`.
    pub fn new(store: Arc<dyn Store>, changes: Changes, config: LoopConfig) -> Self {
        PreparationLoop {
            store,
            changes,
            config,
        }
    }

    /// Runs until `shutdown` triggers.
    pub async fn run(self, shutdown: ShutdownHandle) {
        let mut wake = self.changes.subscribe();
        let mut compacted: Option<tokio::time::Instant> = None;
        loop {
            if shutdown.is_triggered() {
                return;
            }
            // A pass in flight is dropped on shutdown (a plugin call may take up to its
            // timeout); leases it held expire and another daemon (or a restart) retries.
            tokio::select! {
                _ = shutdown.triggered() => return,
                result = self.pass(&shutdown) => {
                    if let Err(err) = result {
                        tracing::warn!(error = %err, "preparation pass failed");
                    }
                }
            }
            // Compaction is bookkeeping: at most every COMPACT_EVERY, not on every wake (a
            // burst of writes wakes the loop once per write).
            if compacted.is_none_or(|at| at.elapsed() >= COMPACT_EVERY) {
                compacted = Some(tokio::time::Instant::now());
                if let Err(err) = self.store.compact_changes(CHANGES_KEPT).await {
                    tracing::warn!(error = %err, "change log compaction failed");
                }
            }
            tokio::select! {
                _ = shutdown.triggered() => return,
                _ = wake.changed() => {}
                _ = tokio::time::sleep(self.config.interval) => {}
            }
        }
    }

    /// Prepares every deployment that is due, until none is.
    pub async fn pass(&self, shutdown: &ShutdownHandle) -> Result<(), StoreError> {
        loop {
            if shutdown.is_triggered() {
                return Ok(());
            }
            let due = self.store.due_for_preparation(now_ms(), 256).await?;
            if due.is_empty() {
                return Ok(());
            }
            let preparers = PreparerSet::load(self.store.as_ref()).await?;
            let progressed = futures::stream::iter(due)
                .map(|id| {
                    let preparers = &preparers;
                    async move { self.prepare_one(&id, preparers).await }
                })
                .buffer_unordered(self.config.concurrency.max(1))
                .fold(false, |any, done| async move { any || done })
                .await;
            if !progressed {
                return Ok(());
            }
        }
    }

    /// Prepares one deployment; whether anything was written.
    async fn prepare_one(&self, id: &str, preparers: &PreparerSet) -> bool {
        let token = uuid::Uuid::new_v4().to_string();
        let lease = self.config.lease.as_millis() as i64;
        let now = now_ms();
        let record = match self
            .store
            .start_modification(id, &token, now, now + lease)
            .await
        {
            Ok(record) => record,
            Err(StoreError::Busy { .. } | StoreError::NotFound { .. }) => return false,
            Err(err) => {
                tracing::warn!(deployment = id, error = %err, "cannot start modification");
                return false;
            }
        };
        // Renew the lease while preparers run.
        let renewer = {
            let store = Arc::clone(&self.store);
            let (id, token) = (id.to_owned(), token.clone());
            let every = self.config.lease / 3;
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let now = now_ms();
                    if let Err(err) = store
                        .renew_modification(&id, &token, now, now + lease)
                        .await
                    {
                        tracing::warn!(deployment = %id, error = %err, "lease renewal failed");
                        return;
                    }
                }
            })
        };
        let result = match self.prepare_package(&record, &token, preparers).await {
            Ok(package) => self.validated(id, package, preparers).await,
            Err(failure) => Err(failure),
        };
        renewer.abort();
        let written = match result {
            Ok(package) => self.finish(&record, &token, package).await,
            Err((package, message)) => self.fail(&record, &token, package, &message).await,
        };
        if let Err(err) = written {
            tracing::warn!(deployment = id, error = %err, "cannot write preparation result");
            let _ = self
                .store
                .write_modification(id, &token, now_ms(), None, true)
                .await;
            return false;
        }
        self.changes.bump();
        true
    }

    /// Runs preparers until nothing preparable is left. Err carries the package as far as it
    /// got and the reason.
    async fn prepare_package(
        &self,
        record: &DeploymentRecord,
        token: &str,
        preparers: &PreparerSet,
    ) -> Result<Package, (Option<Package>, String)> {
        let id = &record.info.id;
        let mut package = Package::from_yaml(&record.package_yaml).map_err(|e| {
            (
                None,
                format!("deployment {id}: stored package is invalid: {e}"),
            )
        })?;
        let has_preparer = |gvk: &Gvk| preparers.has_preparer(gvk);
        let has_validator = |gvk: &Gvk| preparers.has_validator(gvk);
        let lookups = builtin::Lookups::default();
        let scheduling = scheduling::SchedulerCall {
            timeout: self.config.plugin_timeout,
            credentials: &self.config.plugin_credentials,
        };
        for _ in 0..MAX_ROUNDS {
            let pending = preparable_resources(&package, has_preparer);
            if pending.is_empty() {
                return Ok(package);
            }
            let mut prepared_any = false;
            let mut waiting = Vec::new();
            for index in pending {
                let target = package.objects()[index].clone();
                let now = now_text();
                let context = PassContext {
                    store: self.store.as_ref(),
                    preparers,
                    has_preparer: &has_preparer,
                    has_validator: &has_validator,
                    auto_approve: self.config.auto_approve,
                    now: &now,
                    lookups: &lookups,
                    scheduling: &scheduling,
                };
                let before = package.clone();
                let outcome = match preparers.plugin_for(&target.gvk()) {
                    None => builtin::prepare(&context, id, package.clone(), index).await,
                    Some(plugin_record) => {
                        let call = plugin::PluginCall {
                            deployment_id: id,
                            data_endpoint: &self.config.data_endpoint,
                            token,
                            timeout: self.config.plugin_timeout,
                            credentials: &self.config.plugin_credentials,
                        };
                        plugin::call(plugin_record, &call, &package, &target)
                            .await
                            .map(Outcome::Prepared)
                    }
                };
                let described = format!("{} {}", target.kind, target.name().unwrap_or_default());
                match outcome {
                    Ok(Outcome::Prepared(mut next)) => {
                        let gvk = target.gvk();
                        if let Some(object) = next.get_mut(&gvk, target.name().unwrap_or_default())
                        {
                            object.set_annotation(keys::PREPARED, keys::TRUE);
                        }
                        package = next;
                        prepared_any = true;
                        // The package changed shape: recompute what is pending.
                        break;
                    }
                    Ok(Outcome::NotReady(why)) => {
                        package = before;
                        waiting.push(why);
                    }
                    Err(message) => {
                        return Err((Some(before), format!("{described}: {message}")));
                    }
                }
            }
            if !prepared_any {
                return Err((Some(package), format!("not ready: {}", waiting.join("; "))));
            }
        }
        Err((
            Some(package),
            format!("deployment {id}: still preparable after {MAX_ROUNDS} rounds"),
        ))
    }

    /// `package`, prepared, if its validators accept it; else the package (to record the
    /// refusal on) and the refusal's message.
    async fn validated(
        &self,
        id: &str,
        package: Package,
        preparers: &PreparerSet,
    ) -> Result<Package, (Option<Package>, String)> {
        let call = validation::ValidatorCall {
            deployment_id: id,
            timeout: self.config.plugin_timeout,
            credentials: &self.config.plugin_credentials,
        };
        match validation::validate(preparers, &call, &package).await {
            Ok(()) => Ok(package),
            Err(refusal) => Err((Some(package), refusal.message())),
        }
    }

    async fn finish(
        &self,
        record: &DeploymentRecord,
        token: &str,
        mut package: Package,
    ) -> Result<(), StoreError> {
        let now = now_text();
        let approval =
            DeploymentResource::mark_prepared(&mut package, self.config.auto_approve, &now)
                .map_err(|e| StoreError::Corrupt {
                    what: "package",
                    message: e.to_string(),
                })?;
        let update = DeploymentUpdate {
            package_yaml: package.to_yaml(),
            prepared: true,
            approved: approval == Approval::Approved,
            error: String::new(),
            metadata: overlay(&record.info.metadata, &extract_metadata(&package)),
            updated: now,
            author: AUTHOR.to_owned(),
            summary: match approval {
                Approval::Approved => "prepared and approved",
                _ => "prepared",
            }
            .to_owned(),
        };
        self.store
            .write_modification(&record.info.id, token, now_ms(), Some(update), true)
            .await?;
        tracing::info!(deployment = %record.info.id, "prepared");
        Ok(())
    }

    async fn fail(
        &self,
        record: &DeploymentRecord,
        token: &str,
        package: Option<Package>,
        message: &str,
    ) -> Result<(), StoreError> {
        let id = &record.info.id;
        tracing::warn!(deployment = %id, error = message, "preparation failed");
        if let Some(mut package) = package {
            let now = now_text();
            let reason = failure_reason(message);
            if DeploymentResource::record_error(&mut package, reason, message, &now).is_ok() {
                let update = DeploymentUpdate {
                    package_yaml: package.to_yaml(),
                    prepared: false,
                    approved: DeploymentResource::is_approved(&package),
                    error: message.to_owned(),
                    metadata: record.info.metadata.clone(),
                    updated: now,
                    author: AUTHOR.to_owned(),
                    summary: format!("{reason}: {}", first_line(message, 160)),
                };
                self.store
                    .write_modification(id, token, now_ms(), Some(update), false)
                    .await?;
            }
        }
        let shift = record.failures.clamp(0, 20) as u32;
        let delay = self
            .config
            .backoff
            .saturating_mul(1u32 << shift.min(16))
            .min(self.config.max_backoff);
        self.store
            .record_failure(id, token, message, now_ms() + delay.as_millis() as i64)
            .await?;
        self.store
            .write_modification(id, token, now_ms(), None, true)
            .await?;
        Ok(())
    }
}

/// The `Prepared=False` reason of a failure's message: a preparation's error starts with the
/// resource it concerns (`KIND NAME: …`), a validator's refusal with its prefix.
fn failure_reason(message: &str) -> &'static str {
    let about_resource = message.split_once(": ").map_or("", |(_, rest)| rest);
    if message.starts_with("not ready") {
        "NotReady"
    } else if message.starts_with(validation::MESSAGE_PREFIX) {
        validation::VALIDATION_FAILED
    } else if about_resource.starts_with(scheduling::MESSAGE_PREFIX) {
        scheduling::SCHEDULING_FAILED
    } else {
        "PreparerFailed"
    }
}

/// `text`'s first line, cut to at most `chars` characters (a revision's summary).
fn first_line(text: &str, chars: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}
