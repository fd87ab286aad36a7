//! The in-memory object store: one global resourceVersion counter, objects as JSON, the event
//! history and live watchers, and the write semantics (finalizers, garbage collection, status
//! subresource, CRDs).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedSender;

use crate::error::ApiError;
use crate::resources::{self, CRD_GROUP, CRD_PLURAL, ResourceType, StorageKey};
use crate::schema;
use crate::selector::{FieldSelector, LabelSelector};

/// `(namespace, name)`; the namespace is empty for cluster-scoped objects.
pub(crate) type ObjKey = (String, String);

/// The finalizer that holds an owner until its dependents are gone.
const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// Namespaces created at start-up.
const INITIAL_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

#[derive(Debug, Clone, Copy, PartialEq)]
enum EventType {
    Added,
    Modified,
    Deleted,
}

#[derive(Debug)]
struct HistoryEvent {
    rv: u64,
    storage: StorageKey,
    kind: EventType,
    old: Option<Arc<Value>>,
    new: Arc<Value>,
}

/// What a watch stream receives.
#[derive(Debug, Clone)]
pub(crate) enum WatchItem {
    /// ADDED / MODIFIED / DELETED with the object.
    Event(&'static str, Arc<Value>),
    /// A BOOKMARK at this resourceVersion; `initial_end` marks the end of initial events.
    Bookmark { rv: u64, initial_end: bool },
    /// An ERROR event; the stream ends after it.
    Error(ApiError),
    /// The resource stopped being served (its CRD was deleted): the stream ends.
    Close,
}

/// Which objects a watch (or list) selects.
#[derive(Debug, Clone)]
pub(crate) struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && meta_str(obj, "namespace").unwrap_or("") != ns
        {
            return false;
        }
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum WatchStart {
    /// resourceVersion "" or "0": synthetic ADDED events for current objects, then live.
    Current,
    /// Events after this resourceVersion, from the history.
    After(u64),
}

#[derive(Debug)]
struct Watcher {
    storage: StorageKey,
    filter: Filter,
    /// Only events above this resourceVersion are sent (a watch may start from a
    /// resourceVersion the store has not reached yet).
    after: u64,
    tx: UnboundedSender<WatchItem>,
}

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Subresource {
    /// The object itself.
    Main,
    /// `/status`.
    Status,
}

/// The patch flavours, from the request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum PatchKind {
    /// application/merge-patch+json (RFC 7386).
    Merge,
    /// application/strategic-merge-patch+json, handled as a merge patch.
    StrategicAsMerge,
    /// application/json-patch+json (RFC 6902).
    Json,
    /// application/apply-patch+yaml: a merge patch that creates the object when absent.
    Apply,
}

/// `propagationPolicy` of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) enum Propagation {
    #[default]
    Background,
    Foreground,
    Orphan,
}

/// The parts of DeleteOptions the server honours.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOptions {
    pub propagation: Propagation,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
}

fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The metadata map of an object, created if missing (a non-object becomes `{}` first;
/// request bodies are checked with [`into_object`] before they get here).
fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(root) = obj else {
        unreachable!("the value was just made an object")
    };
    let md = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !md.is_object() {
        *md = Value::Object(Map::new());
    }
    let Value::Object(md) = md else {
        unreachable!("metadata was just made an object")
    };
    md
}

fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn owner_uids(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn namespaces_storage() -> StorageKey {
    (String::new(), "namespaces".to_string())
}

/// 409 Conflict unless the stored object's uid is `want` (a PUT body's uid or a DELETE's
/// `preconditions.uid`), worded as Kubernetes words it.
fn check_uid_precondition(
    rt: &ResourceType,
    name: &str,
    stored: &Value,
    want: &str,
) -> Result<(), ApiError> {
    let have = meta_str(stored, "uid").unwrap_or("");
    if want == have {
        return Ok(());
    }
    Err(ApiError::conflict(
        &rt.group_resource(),
        name,
        &format!("Precondition failed: UID in precondition: {want}, UID in object meta: {have}"),
    ))
}

/// Kinds whose PUT creates a missing object, as their Kubernetes strategies allow
/// (`AllowCreateOnUpdate`): Endpoints, Events and Leases.
fn creates_on_update(rt: &ResourceType) -> bool {
    rt.crd.is_none()
        && matches!(
            (rt.group.as_str(), rt.plural.as_str()),
            ("", "endpoints" | "events")
                | ("events.k8s.io", "events")
                | ("coordination.k8s.io", "leases")
        )
}

fn is_terminating(obj: &Value) -> bool {
    meta_str(obj, "deletionTimestamp").is_some()
}

/// Drops empty metadata collections, as Go's `omitempty` does.
fn normalize_metadata(obj: &mut Value) {
    let m = meta_mut(obj);
    for field in [
        "finalizers",
        "ownerReferences",
        "labels",
        "annotations",
        "managedFields",
    ] {
        let empty = match m.get(field) {
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Object(o)) => o.is_empty(),
            Some(Value::Null) => true,
            _ => false,
        };
        if empty {
            m.remove(field);
        }
    }
}

/// What bumps `generation`: everything but metadata and type information, and but `status`
/// unless `with_status` (custom resources without the status subresource, as in Kubernetes).
fn spec_part(obj: &Value, with_status: bool) -> Map<String, Value> {
    obj.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| match k.as_str() {
                    "metadata" | "apiVersion" | "kind" => false,
                    "status" => with_status,
                    _ => true,
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn without_rv(obj: &Value) -> Value {
    let mut o = obj.clone();
    meta_mut(&mut o).remove("resourceVersion");
    if let Some(map) = o.as_object_mut() {
        map.remove("apiVersion");
    }
    o
}

/// The current time as Kubernetes writes it (RFC 3339, seconds, UTC).
fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Checks that a request body is a JSON object.
pub(crate) fn into_object(body: Value) -> Result<Value, ApiError> {
    if body.is_object() {
        Ok(body)
    } else {
        Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ))
    }
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(5)
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

fn hex_encode(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// Applies an RFC 6902 patch; a `test` for `null` passes on a missing path (as Kubernetes'
/// JSON patch library does, and as kube-runtime's finalizer helper relies on).
fn apply_json_patch(doc: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    let ops: Vec<Value> = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
    let mut work = doc.clone();
    for (i, op) in ops.into_iter().enumerate() {
        let is_null_test = op.get("op").and_then(Value::as_str) == Some("test")
            && op.get("value").is_some_and(Value::is_null);
        if is_null_test {
            let path = match op.get("path").and_then(Value::as_str) {
                Some(p) if p.is_empty() || p.starts_with('/') => p,
                other => {
                    return Err(ApiError::bad_request(format!(
                        "invalid JSON patch operation at index {i}: path {other:?} is not a JSON pointer"
                    )));
                }
            };
            let found = work.pointer(path).cloned().unwrap_or(Value::Null);
            if !found.is_null() {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    format!(
                        "the JSON patch test operation at index {i} failed: the value at {path:?} is {found}, not null"
                    ),
                ));
            }
            continue;
        }
        let parsed: json_patch::PatchOperation = serde_json::from_value(op).map_err(|e| {
            ApiError::bad_request(format!("invalid JSON patch operation at index {i}: {e}"))
        })?;
        json_patch::patch(&mut work, std::slice::from_ref(&parsed)).map_err(|e| {
            let what = match e.kind {
                json_patch::PatchErrorKind::TestFailed => "test operation failed",
                _ => "operation could not be applied",
            };
            ApiError::new(
                422,
                "Invalid",
                format!(
                    "the JSON patch {what} at index {i} (path {}): {}",
                    e.path, e.kind
                ),
            )
        })?;
    }
    *doc = work;
    Ok(())
}

/// Parses an apply patch: JSON, or YAML.
fn parse_apply_body(body: &[u8]) -> Result<Value, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => Ok(v),
        Err(_) => serde_norway::from_slice::<Value>(body).map_err(|e| {
            ApiError::bad_request(format!("invalid apply patch (neither JSON nor YAML): {e}"))
        }),
    }
}

/// The in-memory API state.
#[derive(Debug)]
pub(crate) struct Store {
    rv: u64,
    types: Vec<ResourceType>,
    objects: HashMap<StorageKey, BTreeMap<ObjKey, Value>>,
    uids: HashMap<String, (StorageKey, ObjKey)>,
    history: VecDeque<HistoryEvent>,
    history_limit: usize,
    /// Every event with a resourceVersion above this is still in `history`.
    compacted: u64,
    watchers: Vec<Watcher>,
}

impl Store {
    /// A store with the built-in kinds and the initial namespaces.
    pub fn new(history_limit: usize) -> Self {
        let mut store = Self {
            rv: 0,
            types: resources::builtins(),
            objects: HashMap::new(),
            uids: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            compacted: 0,
            watchers: Vec::new(),
        };
        if let Some(ns_type) = store.resolve("", "v1", "namespaces") {
            for ns in INITIAL_NAMESPACES {
                let body = json!({"metadata": {"name": ns}});
                // Cannot fail: the namespaces do not exist yet and the body is valid.
                let _ = store.create(&ns_type, None, body);
            }
        }
        store
    }

    /// Every served resource type.
    pub fn types(&self) -> &[ResourceType] {
        &self.types
    }

    /// The served type for a group/version/plural.
    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> Option<ResourceType> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
            .cloned()
    }

    /// The latest resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    fn key(rt: &ResourceType, ns: Option<&str>, name: &str) -> ObjKey {
        let ns = if rt.namespaced { ns.unwrap_or("") } else { "" };
        (ns.to_string(), name.to_string())
    }

    fn stored(&self, storage: &StorageKey, key: &ObjKey) -> Option<&Value> {
        self.objects.get(storage).and_then(|m| m.get(key))
    }

    /// Rewrites type information for the version the client asked for.
    pub fn present(rt: &ResourceType, obj: &Value) -> Value {
        let mut out = obj.clone();
        if let Some(map) = out.as_object_mut() {
            map.insert("apiVersion".into(), json!(rt.api_version()));
            map.insert("kind".into(), json!(rt.kind));
        }
        out
    }

    /// GET one object.
    pub fn get(&self, rt: &ResourceType, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        self.stored(&rt.storage(), &Self::key(rt, ns, name))
            .map(|o| Self::present(rt, o))
            .ok_or_else(|| ApiError::not_found(&rt.group_resource(), name))
    }

    /// LIST with selectors and paging. Continue tokens page through the current state (not a
    /// snapshot) in (namespace, name) order; the list's resourceVersion stays the first page's.
    pub fn list(
        &self,
        rt: &ResourceType,
        filter: &Filter,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<Value, ApiError> {
        let (list_rv, after) = match continue_token.filter(|t| !t.is_empty()) {
            None => (self.rv, None),
            Some(token) => {
                let decoded = hex_decode(token).ok_or_else(|| {
                    ApiError::bad_request(format!("invalid continue token {token:?}"))
                })?;
                let mut parts = decoded.splitn(3, '\0');
                let rv = parts.next().and_then(|r| r.parse::<u64>().ok());
                match (rv, parts.next(), parts.next()) {
                    (Some(rv), Some(ns), Some(name)) => {
                        (rv, Some((ns.to_string(), name.to_string())))
                    }
                    _ => {
                        return Err(ApiError::bad_request(format!(
                            "invalid continue token {token:?}"
                        )));
                    }
                }
            }
        };
        let empty = BTreeMap::new();
        let objects = self.objects.get(&rt.storage()).unwrap_or(&empty);
        let mut matching = objects
            .iter()
            .filter(|(k, _)| after.as_ref().is_none_or(|a| *k > a))
            .filter(|(_, o)| filter.matches(o));
        let mut items = Vec::new();
        let mut last_key = None;
        let limit = limit.filter(|l| *l > 0);
        for (k, o) in matching.by_ref() {
            items.push(Self::present(rt, o));
            last_key = Some(k.clone());
            if limit.is_some_and(|l| items.len() >= l) {
                break;
            }
        }
        let remaining = matching.count();
        let mut list_meta = json!({"resourceVersion": list_rv.to_string()});
        if remaining > 0
            && let (Some((ns, name)), Some(m)) = (last_key, list_meta.as_object_mut())
        {
            m.insert(
                "continue".into(),
                json!(hex_encode(&format!("{list_rv}\0{ns}\0{name}"))),
            );
            // Kubernetes only counts the rest of an unfiltered list.
            if filter.labels == LabelSelector::default()
                && filter.fields == FieldSelector::default()
            {
                m.insert("remainingItemCount".into(), json!(remaining));
            }
        }
        Ok(json!({
            "kind": format!("{}List", rt.kind),
            "apiVersion": rt.api_version(),
            "metadata": list_meta,
            "items": items,
        }))
    }

    /// Registers a watch; initial events (synthetic or from history) are sent before any live
    /// event, all under the store lock, so the stream is ordered by resourceVersion.
    pub fn watch(
        &mut self,
        rt: &ResourceType,
        filter: Filter,
        start: WatchStart,
        initial_end_bookmark: bool,
        tx: UnboundedSender<WatchItem>,
    ) {
        let storage = rt.storage();
        let mut after = self.rv;
        match start {
            WatchStart::Current => {
                if let Some(objects) = self.objects.get(&storage) {
                    for obj in objects.values().filter(|o| filter.matches(o)) {
                        let _ = tx.send(WatchItem::Event("ADDED", Arc::new(obj.clone())));
                    }
                }
                if initial_end_bookmark {
                    let _ = tx.send(WatchItem::Bookmark {
                        rv: self.rv,
                        initial_end: true,
                    });
                }
            }
            WatchStart::After(rv) => {
                after = rv;
                if rv < self.compacted {
                    let _ = tx.send(WatchItem::Error(ApiError::expired(format!(
                        "too old resource version: {rv} ({})",
                        self.compacted
                    ))));
                    return;
                }
                for ev in self
                    .history
                    .iter()
                    .filter(|e| e.rv > rv && e.storage == storage)
                {
                    if let Some(item) = translate(&filter, ev) {
                        let _ = tx.send(item);
                    }
                }
            }
        }
        self.watchers.retain(|w| !w.tx.is_closed());
        self.watchers.push(Watcher {
            storage,
            filter,
            after,
            tx,
        });
    }

    /// Ends every open watch of `plural` (or `*`) with a 410 Expired ERROR event, as when the
    /// server's watch cache is reset; returns how many watches were ended.
    pub fn expire_watchers(&mut self, plural: &str) -> usize {
        let mut ended = 0;
        self.watchers.retain(|w| {
            if plural != "*" && w.storage.1 != plural {
                return !w.tx.is_closed();
            }
            let _ = w.tx.send(WatchItem::Error(ApiError::expired(
                "too old resource version: the watch was expired by the test",
            )));
            ended += 1;
            false
        });
        ended
    }

    /// Sends a bookmark at the current resourceVersion through a watch's own channel (under
    /// the store lock, so it is ordered after every event already sent to it). Nothing is sent
    /// while the store is still below `floor`, the resourceVersion the watch started from.
    pub fn bookmark(&self, tx: &UnboundedSender<WatchItem>, floor: u64) {
        if self.rv < floor {
            return;
        }
        let _ = tx.send(WatchItem::Bookmark {
            rv: self.rv,
            initial_end: false,
        });
    }

    fn record(&mut self, storage: &StorageKey, kind: EventType, old: Option<Value>, new: Value) {
        let rv = self.rv;
        let ev = HistoryEvent {
            rv,
            storage: storage.clone(),
            kind,
            old: old.map(Arc::new),
            new: Arc::new(new),
        };
        self.watchers.retain(|w| {
            if w.storage != ev.storage || ev.rv <= w.after {
                return !w.tx.is_closed();
            }
            match translate(&w.filter, &ev) {
                Some(item) => w.tx.send(item).is_ok(),
                None => !w.tx.is_closed(),
            }
        });
        self.history.push_back(ev);
        while self.history.len() > self.history_limit {
            if let Some(dropped) = self.history.pop_front() {
                self.compacted = dropped.rv;
            }
        }
    }

    /// Stores `new` under the next resourceVersion and emits ADDED or MODIFIED.
    fn commit_put(&mut self, storage: &StorageKey, key: ObjKey, mut new: Value) -> Value {
        self.rv += 1;
        meta_mut(&mut new).insert("resourceVersion".into(), json!(self.rv.to_string()));
        if let Some(uid) = meta_str(&new, "uid") {
            self.uids
                .insert(uid.to_string(), (storage.clone(), key.clone()));
        }
        let old = self
            .objects
            .entry(storage.clone())
            .or_default()
            .insert(key, new.clone());
        let kind = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(storage, kind, old, new.clone());
        if storage.0 == CRD_GROUP && storage.1 == CRD_PLURAL {
            self.serve_crd(&new);
        }
        new
    }

    /// Removes an object under the next resourceVersion and emits DELETED with `last` (or the
    /// stored object) as its final state. Runs the namespace and CRD clean-ups.
    fn commit_remove(
        &mut self,
        storage: &StorageKey,
        key: &ObjKey,
        last: Option<Value>,
    ) -> Option<Value> {
        let old = self.objects.get_mut(storage)?.remove(key)?;
        if let Some(uid) = meta_str(&old, "uid") {
            self.uids.remove(uid);
        }
        self.rv += 1;
        let mut last = last.unwrap_or_else(|| old.clone());
        meta_mut(&mut last).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.record(storage, EventType::Deleted, Some(old), last.clone());
        if storage.0.is_empty() && storage.1 == "namespaces" {
            self.drop_namespace_contents(&key.1);
        }
        if storage.0 == CRD_GROUP && storage.1 == CRD_PLURAL {
            self.unserve_crd(&last);
        }
        Some(last)
    }

    fn validate_schema(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
        if let Some(schema) = &rt.schema
            && let Some(field) = schema::missing_required(schema, obj)
        {
            let name = meta_str(obj, "name").unwrap_or("");
            return Err(ApiError::invalid(
                &format!("{}.{}", rt.kind, rt.group),
                name,
                &field,
                "Required value",
            ));
        }
        Ok(())
    }

    /// Validates a CRD (against `old`, its stored state, on an update) and fills in the status
    /// a real apiserver's controllers would set. Conditions keep their `lastTransitionTime`,
    /// so rewriting an unchanged CRD stays a no-op.
    fn prepare_crd(&self, crd: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
        let def = resources::parse_crd(crd).map_err(|(field, problem)| {
            ApiError::invalid(
                "CustomResourceDefinition.apiextensions.k8s.io",
                meta_str(crd, "name").unwrap_or(""),
                &field,
                &problem,
            )
        })?;
        if let Some(old) = old {
            // An established CRD's scope and kind are immutable (and the stored objects' keys
            // depend on the scope).
            for (pointer, field) in [
                ("/spec/scope", "spec.scope"),
                ("/spec/names/kind", "spec.names.kind"),
            ] {
                let (was, is) = (old.pointer(pointer), crd.pointer(pointer));
                if was != is {
                    return Err(ApiError::invalid(
                        "CustomResourceDefinition.apiextensions.k8s.io",
                        meta_str(crd, "name").unwrap_or(""),
                        field,
                        &format!(
                            "Invalid value: {}: field is immutable",
                            is.unwrap_or(&Value::Null)
                        ),
                    ));
                }
            }
        }
        let clashes = self
            .types
            .iter()
            .any(|t| t.group == def.group && t.plural == def.plural && t.crd.is_none());
        if clashes {
            return Err(ApiError::invalid(
                "CustomResourceDefinition.apiextensions.k8s.io",
                meta_str(crd, "name").unwrap_or(""),
                "spec.names.plural",
                "Invalid value: the group/resource is served by a built-in type",
            ));
        }
        let time = now();
        let condition = |t: &str, reason: &str, msg: &str| {
            let since = old
                .and_then(|o| o.pointer("/status/conditions"))
                .and_then(Value::as_array)
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c.get("type").and_then(Value::as_str) == Some(t))
                })
                .and_then(|c| c.get("lastTransitionTime"))
                .cloned()
                .unwrap_or_else(|| json!(time));
            json!({"type": t, "status": "True", "lastTransitionTime": since, "reason": reason, "message": msg})
        };
        let stored_versions: Vec<Value> = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter(|v| v.get("storage").and_then(Value::as_bool).unwrap_or(false))
                    .filter_map(|v| v.get("name").cloned())
                    .collect()
            })
            .unwrap_or_default();
        if let Some(map) = crd.as_object_mut() {
            map.insert(
                "status".into(),
                json!({
                    "conditions": [
                        condition("NamesAccepted", "NoConflicts", "no conflicts found"),
                        condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                    ],
                    "acceptedNames": def.names,
                    "storedVersions": stored_versions,
                }),
            );
        }
        Ok(())
    }

    fn serve_crd(&mut self, crd: &Value) {
        let Ok(def) = resources::parse_crd(crd) else {
            return;
        };
        let name = meta_str(crd, "name").unwrap_or("").to_string();
        self.types
            .retain(|t| t.crd.as_deref() != Some(name.as_str()));
        self.types.extend(def.types);
    }

    fn unserve_crd(&mut self, crd: &Value) {
        let name = meta_str(crd, "name").unwrap_or("").to_string();
        self.types
            .retain(|t| t.crd.as_deref() != Some(name.as_str()));
        if let Ok(def) = resources::parse_crd(crd) {
            let storage = (def.group, def.plural);
            let keys: Vec<ObjKey> = self
                .objects
                .get(&storage)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            for key in keys {
                self.commit_remove(&storage, &key, None);
            }
            self.objects.remove(&storage);
            self.watchers.retain(|w| {
                if w.storage == storage {
                    let _ = w.tx.send(WatchItem::Close);
                    false
                } else {
                    true
                }
            });
        }
    }

    fn drop_namespace_contents(&mut self, ns: &str) {
        let mut doomed = Vec::new();
        for (storage, objects) in &self.objects {
            for key in objects.keys().filter(|k| k.0 == ns) {
                doomed.push((storage.clone(), key.clone()));
            }
        }
        for (storage, key) in doomed {
            self.delete_internal(&storage, &key, Propagation::Background);
        }
    }

    /// POST: create an object.
    pub fn create(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        body: Value,
    ) -> Result<Value, ApiError> {
        let mut obj = into_object(body)?;
        check_type(rt, &obj)?;
        if meta_str(&obj, "resourceVersion").is_some() {
            // What a real apiserver answers (a 500 from its storage layer): the object was most
            // likely copied from a read, and Kubernetes refuses to create it.
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let name = match meta_str(&obj, "name") {
            Some(n) => n.to_string(),
            None => match meta_str(&obj, "generateName") {
                Some(prefix) => format!("{prefix}{}", random_suffix()),
                None => {
                    return Err(ApiError::invalid(
                        &rt.kind,
                        "",
                        "metadata.name",
                        "Required value: name or generateName is required",
                    ));
                }
            },
        };
        if name.contains('/') || name.contains('%') || name == "." || name == ".." {
            return Err(ApiError::invalid(
                &rt.kind,
                &name,
                "metadata.name",
                "Invalid value: may not contain '/' or '%' or be '.' or '..'",
            ));
        }
        let namespace = if rt.namespaced {
            let url_ns = ns.unwrap_or("");
            let body_ns = meta_str(&obj, "namespace").unwrap_or(url_ns);
            if url_ns.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "{} is namespaced: create it under /namespaces/<namespace>/",
                    rt.group_resource()
                )));
            }
            if body_ns != url_ns {
                return Err(ApiError::bad_request(format!(
                    "the namespace of the provided object ({body_ns}) does not match the namespace sent on the request ({url_ns})"
                )));
            }
            match self.stored(&namespaces_storage(), &(String::new(), url_ns.to_string())) {
                None => return Err(ApiError::not_found("namespaces", url_ns)),
                Some(n) if is_terminating(n) => {
                    return Err(ApiError::namespace_terminating(url_ns));
                }
                Some(_) => {}
            }
            Some(url_ns.to_string())
        } else {
            None
        };
        let key = Self::key(rt, namespace.as_deref(), &name);
        let storage = rt.storage();
        if self.stored(&storage, &key).is_some() {
            return Err(ApiError::already_exists(&rt.group_resource(), &name));
        }
        if let Some(map) = obj.as_object_mut() {
            map.insert("apiVersion".into(), json!(rt.api_version()));
            map.insert("kind".into(), json!(rt.kind));
            if rt.status_subresource {
                map.remove("status");
            }
            if storage.0.is_empty() && storage.1 == "namespaces" {
                map.insert("status".into(), json!({"phase": "Active"}));
            }
        }
        let m = meta_mut(&mut obj);
        m.insert("name".into(), json!(name));
        match &namespace {
            Some(ns) => m.insert("namespace".into(), json!(ns)),
            None => m.remove("namespace"),
        };
        m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        m.insert("creationTimestamp".into(), json!(now()));
        m.insert("generation".into(), json!(1));
        for f in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ] {
            m.remove(f);
        }
        normalize_metadata(&mut obj);
        Self::validate_schema(rt, &obj)?;
        if storage.0 == CRD_GROUP && storage.1 == CRD_PLURAL {
            self.prepare_crd(&mut obj, None)?;
        }
        let has_owners = !owner_uids(&obj).is_empty();
        let stored = self.commit_put(&storage, key, obj);
        if has_owners {
            self.collect_garbage();
        }
        Ok(Self::present(rt, &stored))
    }

    /// PUT: replace an object (or its status). Returns the object and whether it was created
    /// (only the kinds Kubernetes creates on update: Endpoints, Events, Leases).
    pub fn replace(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        body: Value,
        sub: Subresource,
    ) -> Result<(Value, bool), ApiError> {
        let key = Self::key(rt, ns, name);
        let mut obj = into_object(body)?;
        check_type(rt, &obj)?;
        check_name(rt, &key, name, &obj)?;
        let Some(old) = self.stored(&rt.storage(), &key).cloned() else {
            if creates_on_update(rt) && sub == Subresource::Main {
                meta_mut(&mut obj).remove("resourceVersion");
                return self.create(rt, ns, obj).map(|o| (o, true));
            }
            return Err(ApiError::not_found(&rt.group_resource(), name));
        };
        // Kubernetes turns a uid in a PUT body into a precondition.
        if let Some(want) = meta_str(&obj, "uid") {
            check_uid_precondition(rt, name, &old, want)?;
        }
        check_rv_precondition(rt, name, &old, &obj)?;
        self.write_existing(rt, key, old, obj, sub)
            .map(|o| (o, false))
    }

    /// PATCH (merge, JSON, strategic-as-merge, apply). Returns the object and whether it was
    /// created (apply on a missing object).
    pub fn patch(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        kind: PatchKind,
        body: &[u8],
        sub: Subresource,
    ) -> Result<(Value, bool), ApiError> {
        let key = Self::key(rt, ns, name);
        let existing = self.stored(&rt.storage(), &key).cloned();
        let Some(old) = existing else {
            if kind == PatchKind::Apply && sub == Subresource::Main {
                let mut obj = into_object(parse_apply_body(body)?)?;
                check_apply_type(rt, &obj)?;
                if let Some(body_name) = meta_str(&obj, "name")
                    && body_name != name
                {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({body_name}) does not match the name on the URL ({name})"
                    )));
                }
                meta_mut(&mut obj).insert("name".into(), json!(name));
                return self.create(rt, ns, obj).map(|o| (o, true));
            }
            return Err(ApiError::not_found(&rt.group_resource(), name));
        };
        let mut doc = old.clone();
        match kind {
            PatchKind::Merge | PatchKind::StrategicAsMerge => {
                let patch: Value = serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("invalid merge patch: {e}")))?;
                if !patch.is_object() {
                    return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                }
                json_patch::merge(&mut doc, &patch);
            }
            PatchKind::Apply => {
                let patch = into_object(parse_apply_body(body)?)?;
                check_apply_type(rt, &patch)?;
                json_patch::merge(&mut doc, &patch);
            }
            PatchKind::Json => apply_json_patch(&mut doc, body)?,
        }
        let doc = into_object(doc).map_err(|_| {
            ApiError::new(422, "Invalid", "the patched object is not a JSON object")
        })?;
        check_patched(rt, &key, name, &old, &doc)?;
        check_rv_precondition(rt, name, &old, &doc)?;
        self.write_existing(rt, key, old, doc, sub)
            .map(|o| (o, false))
    }

    /// The shared update path: applies the status-subresource rules, keeps system metadata,
    /// bumps generation on spec changes, skips no-op writes and finishes deletions whose last
    /// finalizer went away.
    fn write_existing(
        &mut self,
        rt: &ResourceType,
        key: ObjKey,
        old: Value,
        proposed: Value,
        sub: Subresource,
    ) -> Result<Value, ApiError> {
        let storage = rt.storage();
        let mut new = match sub {
            Subresource::Status => {
                let mut n = old.clone();
                if let Some(map) = n.as_object_mut() {
                    match proposed.get("status") {
                        Some(s) if !s.is_null() => map.insert("status".into(), s.clone()),
                        _ => map.remove("status"),
                    };
                }
                n
            }
            Subresource::Main => {
                let mut n = proposed;
                if rt.status_subresource
                    && let Some(map) = n.as_object_mut()
                {
                    match old.get("status") {
                        Some(s) => map.insert("status".into(), s.clone()),
                        None => map.remove("status"),
                    };
                }
                n
            }
        };
        if let Some(map) = new.as_object_mut() {
            map.insert("apiVersion".into(), json!(rt.api_version()));
            map.insert("kind".into(), json!(rt.kind));
        }
        let old_meta = meta(&old).cloned().unwrap_or_default();
        let m = meta_mut(&mut new);
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "name",
            "namespace",
            "generation",
            "resourceVersion",
        ] {
            match old_meta.get(f) {
                Some(v) => m.insert(f.into(), v.clone()),
                None => m.remove(f),
            };
        }
        m.remove("managedFields");
        m.remove("selfLink");
        normalize_metadata(&mut new);
        let with_status = rt.crd.is_some() && !rt.status_subresource;
        if spec_part(&new, with_status) != spec_part(&old, with_status) {
            let generation = old_meta
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            meta_mut(&mut new).insert("generation".into(), json!(generation + 1));
        }
        Self::validate_schema(rt, &new)?;
        if storage.0 == CRD_GROUP && storage.1 == CRD_PLURAL {
            self.prepare_crd(&mut new, Some(&old))?;
        }
        if without_rv(&new) == without_rv(&old) {
            return Ok(Self::present(rt, &old));
        }
        if is_terminating(&new) && finalizers(&new).is_empty() {
            let last = self
                .commit_remove(&storage, &key, Some(new.clone()))
                .unwrap_or(new);
            self.collect_garbage();
            return Ok(Self::present(rt, &last));
        }
        let has_owners = !owner_uids(&new).is_empty();
        let stored = self.commit_put(&storage, key, new);
        if has_owners {
            self.collect_garbage();
        }
        Ok(Self::present(rt, &stored))
    }

    /// DELETE one object.
    pub fn delete(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let storage = rt.storage();
        let key = Self::key(rt, ns, name);
        let old = self
            .stored(&storage, &key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.group_resource(), name))?;
        if let Some(want) = &opts.precondition_uid {
            check_uid_precondition(rt, name, &old, want)?;
        }
        if let Some(want) = &opts.precondition_rv {
            let have = meta_str(&old, "resourceVersion").unwrap_or("");
            if want != have {
                return Err(ApiError::conflict(
                    &rt.group_resource(),
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {have}"
                    ),
                ));
            }
        }
        let result = self
            .delete_internal(&storage, &key, opts.propagation)
            .unwrap_or(old);
        self.collect_garbage();
        Ok(Self::present(rt, &result))
    }

    /// Starts or finishes a deletion: with finalizers (or Foreground) the object gets a
    /// deletionTimestamp and stays; otherwise it is removed. Returns the object's new state.
    fn delete_internal(
        &mut self,
        storage: &StorageKey,
        key: &ObjKey,
        propagation: Propagation,
    ) -> Option<Value> {
        let old = self.stored(storage, key)?.clone();
        if is_terminating(&old) {
            return Some(old);
        }
        if propagation == Propagation::Orphan
            && let Some(uid) = meta_str(&old, "uid")
        {
            self.orphan_dependents(uid);
        }
        let mut fins = finalizers(&old);
        if propagation == Propagation::Foreground && !fins.iter().any(|f| f == FOREGROUND_FINALIZER)
        {
            fins.push(FOREGROUND_FINALIZER.into());
        }
        if fins.is_empty() {
            return self.commit_remove(storage, key, None);
        }
        let mut new = old;
        let m = meta_mut(&mut new);
        m.insert("deletionTimestamp".into(), json!(now()));
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
        m.insert("finalizers".into(), json!(fins));
        let namespace = *storage == namespaces_storage();
        if namespace && let Some(map) = new.as_object_mut() {
            map.insert("status".into(), json!({"phase": "Terminating"}));
        }
        let stored = self.commit_put(storage, key.clone(), new);
        if namespace {
            // A terminating namespace loses its contents at once, as the namespace controller
            // would do; the namespace itself waits for its finalizers.
            self.drop_namespace_contents(&key.1);
        }
        Some(stored)
    }

    /// Removes the owner reference to `owner_uid` from every dependent.
    fn orphan_dependents(&mut self, owner_uid: &str) {
        for (storage, key) in self.dependents(owner_uid) {
            let Some(mut obj) = self.stored(&storage, &key).cloned() else {
                continue;
            };
            if let Some(refs) = meta_mut(&mut obj)
                .get_mut("ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
            }
            normalize_metadata(&mut obj);
            self.commit_put(&storage, key, obj);
        }
    }

    fn dependents(&self, owner_uid: &str) -> Vec<(StorageKey, ObjKey)> {
        let mut out = Vec::new();
        for (storage, objects) in &self.objects {
            for (key, obj) in objects {
                if owner_uids(obj).iter().any(|u| u == owner_uid) {
                    out.push((storage.clone(), key.clone()));
                }
            }
        }
        out
    }

    /// The garbage collector, run synchronously after writes that can affect it:
    /// dependents whose owners are all gone are deleted (Background); owners held by the
    /// `foregroundDeletion` finalizer get their dependents deleted and are released once none
    /// remain.
    fn collect_garbage(&mut self) {
        // Each round deletes or releases at least one object, so this terminates; the bound
        // is a guard only.
        for _ in 0..100_000 {
            let mut changed = false;
            let mut waiting = Vec::new();
            let mut orphans = Vec::new();
            for (storage, objects) in &self.objects {
                for (key, obj) in objects {
                    if is_terminating(obj)
                        && finalizers(obj).iter().any(|f| f == FOREGROUND_FINALIZER)
                        && let Some(uid) = meta_str(obj, "uid")
                    {
                        waiting.push((storage.clone(), key.clone(), uid.to_string()));
                    }
                    let owners = owner_uids(obj);
                    if !is_terminating(obj)
                        && !owners.is_empty()
                        && owners.iter().all(|u| !self.uids.contains_key(u))
                    {
                        orphans.push((storage.clone(), key.clone()));
                    }
                }
            }
            for (storage, key) in orphans {
                self.delete_internal(&storage, &key, Propagation::Background);
                changed = true;
            }
            for (storage, key, uid) in waiting {
                let deps = self.dependents(&uid);
                let mut live = false;
                for (dep_storage, dep_key) in deps {
                    let terminating = self
                        .stored(&dep_storage, &dep_key)
                        .is_some_and(is_terminating);
                    live = true;
                    if !terminating {
                        self.delete_internal(&dep_storage, &dep_key, Propagation::Background);
                        changed = true;
                    }
                }
                if !live && let Some(mut owner) = self.stored(&storage, &key).cloned() {
                    let fins: Vec<String> = finalizers(&owner)
                        .into_iter()
                        .filter(|f| f != FOREGROUND_FINALIZER)
                        .collect();
                    meta_mut(&mut owner).insert("finalizers".into(), json!(fins));
                    normalize_metadata(&mut owner);
                    if fins.is_empty() {
                        self.commit_remove(&storage, &key, Some(owner));
                    } else {
                        self.commit_put(&storage, key, owner);
                    }
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// DELETE on a collection: deletes every selected object; returns them as a list.
    pub fn delete_collection(
        &mut self,
        rt: &ResourceType,
        filter: &Filter,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let storage = rt.storage();
        let keys: Vec<ObjKey> = self
            .objects
            .get(&storage)
            .map(|m| {
                m.iter()
                    .filter(|(_, o)| filter.matches(o))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        let mut items = Vec::new();
        for key in keys {
            if let Some(obj) = self.delete_internal(&storage, &key, opts.propagation) {
                items.push(Self::present(rt, &obj));
            }
        }
        self.collect_garbage();
        Ok(json!({
            "kind": format!("{}List", rt.kind),
            "apiVersion": rt.api_version(),
            "metadata": {"resourceVersion": self.rv.to_string()},
            "items": items,
        }))
    }
}

/// A body's `kind`/`apiVersion`, when present, must be the resource's.
fn check_type(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    if let Some(kind) = obj
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        && kind != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "the body's kind {kind:?} does not match the resource {} (kind {:?})",
            rt.group_resource(),
            rt.kind
        )));
    }
    if let Some(api_version) = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
    {
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        if group != rt.group {
            return Err(ApiError::bad_request(format!(
                "the body's apiVersion {api_version:?} is not in the group {:?} of {}",
                rt.group,
                rt.group_resource()
            )));
        }
    }
    Ok(())
}

/// An apply patch must name the exact apiVersion and kind of the endpoint (Kubernetes'
/// field manager refuses anything else with 400).
fn check_apply_type(rt: &ResourceType, patch: &Value) -> Result<(), ApiError> {
    let api_version = patch
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if api_version != rt.api_version() {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {api_version}, expected: {} (an apply patch must set apiVersion and kind)",
            rt.api_version()
        )));
    }
    let kind = patch.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != rt.kind {
        return Err(ApiError::bad_request(format!(
            "invalid object type: {api_version}, Kind={kind} (an apply patch to {} must set kind {:?})",
            rt.group_resource(),
            rt.kind
        )));
    }
    Ok(())
}

/// The name (required) and namespace (when set) of a written object must be the URL's.
fn check_name(rt: &ResourceType, key: &ObjKey, name: &str, obj: &Value) -> Result<(), ApiError> {
    let body_name = meta_str(obj, "name").unwrap_or("");
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if rt.namespaced
        && let Some(body_ns) = meta_str(obj, "namespace")
        && body_ns != key.0
    {
        return Err(ApiError::bad_request(format!(
            "the namespace of the provided object ({body_ns}) does not match the namespace sent on the request ({})",
            key.0
        )));
    }
    Ok(())
}

/// What Kubernetes checks on the result of a patch before writing it: the name and namespace
/// stay the URL's (400), the uid cannot change (422), a custom resource keeps its apiVersion
/// and kind (422 when removed), and the type cannot change (400).
fn check_patched(
    rt: &ResourceType,
    key: &ObjKey,
    name: &str,
    old: &Value,
    doc: &Value,
) -> Result<(), ApiError> {
    check_name(rt, key, name, doc)?;
    if let Some(uid) = meta_str(doc, "uid")
        && Some(uid) != meta_str(old, "uid")
    {
        return Err(ApiError::invalid(
            &format!("{}.{}", rt.kind, rt.group),
            name,
            "metadata.uid",
            &format!("Invalid value: {uid:?}: field is immutable"),
        ));
    }
    if rt.crd.is_some() {
        for field in ["apiVersion", "kind"] {
            if doc
                .get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(ApiError::invalid(
                    &format!("{}.{}", rt.kind, rt.group),
                    name,
                    "patch",
                    &format!("Invalid value: Object '{field}' is missing in the patched object"),
                ));
            }
        }
    }
    check_type(rt, doc)
}

/// A non-empty metadata.resourceVersion in a write must equal the stored one.
fn check_rv_precondition(
    rt: &ResourceType,
    name: &str,
    old: &Value,
    proposed: &Value,
) -> Result<(), ApiError> {
    if let Some(want) = meta_str(proposed, "resourceVersion")
        && Some(want) != meta_str(old, "resourceVersion")
    {
        return Err(ApiError::conflict(
            &rt.group_resource(),
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ));
    }
    Ok(())
}

/// Turns a history event into what a watcher with `filter` sees: objects moving into the
/// selection appear as ADDED, out of it as DELETED.
fn translate(filter: &Filter, ev: &HistoryEvent) -> Option<WatchItem> {
    let new_matches = filter.matches(&ev.new);
    let old_matches = ev.old.as_ref().is_some_and(|o| filter.matches(o));
    let ty = match ev.kind {
        EventType::Added => new_matches.then_some("ADDED")?,
        EventType::Deleted => (old_matches || new_matches).then_some("DELETED")?,
        EventType::Modified => match (old_matches, new_matches) {
            (true, true) => "MODIFIED",
            (false, true) => "ADDED",
            (true, false) => "DELETED",
            (false, false) => return None,
        },
    };
    Some(WatchItem::Event(ty, ev.new.clone()))
}

#[cfg(test)]
mod tests;
