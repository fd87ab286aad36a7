//! Writes: create (POST), update (PUT) and patch, and the update path they share — the
//! status-subresource rules, system metadata kept, `generation` bumped on spec changes, no-op
//! writes skipped, and deletions finished when the last finalizer goes.

use nephrite_krm::Object;
use serde_json::{Value, json};

use super::builtin;
use super::checks::{
    check_apply_type, check_name, check_no_new_finalizers, check_patched, check_patched_type,
    check_rv_given_for_custom_update, check_rv_precondition, check_type, check_uid_precondition,
    creates_on_update,
};
use super::decode::{FieldValidation, decode};
use super::managed::{ManagedFields, Manager, Operation, Scope, conflict_error};
use super::meta::{keep_system_fields, now, random_suffix, same_content, spec_changed};
use super::validation::{MAX_GENERATED_PREFIX, metadata_problems, name_problems, refuse};
use super::{ObjectKey, Patch, StorageKey, Store};
use crate::error::{ApiError, FieldProblem};
use crate::resources::ResourceType;
use crate::schema;

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Subresource {
    /// The object itself.
    Main,
    /// `/status`.
    Status,
}

/// How a write is made: what happens to unknown fields, which field manager makes it, and
/// whether an apply takes fields from other managers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WriteOptions {
    /// The request's `fieldValidation`.
    pub validation: FieldValidation,
    /// The `fieldManager` (or the User-Agent's product name).
    pub manager: String,
    /// The request's `force` (server-side apply only).
    pub force: bool,
}

impl WriteOptions {
    /// Options with `validation`, an unnamed manager and no force.
    pub fn new(validation: FieldValidation) -> Self {
        Self {
            validation,
            manager: String::new(),
            force: false,
        }
    }

    fn manager(&self, operation: Operation, sub: Subresource) -> Manager {
        Manager {
            name: self.manager.clone(),
            operation,
            status: sub == Subresource::Status,
        }
    }
}

/// What a write does to field ownership once it is stored.
enum Ownership {
    /// A non-apply write: its manager takes the fields it changed.
    Update(Manager),
    /// An apply: the ownership it computed.
    Applied(ManagedFields),
}

/// Which fields a write to `sub` of `rt` can own.
fn scope(rt: &ResourceType, sub: Subresource) -> Scope {
    match sub {
        Subresource::Status => Scope::StatusOnly,
        Subresource::Main if rt.status_subresource => Scope::NoStatus,
        Subresource::Main => Scope::All,
    }
}

/// What a successful write answers with.
#[derive(Debug, Clone)]
pub(crate) struct Written {
    /// The object as stored (or as it was, for a no-op write).
    pub object: Object,
    /// Whether the write created the object (201).
    pub created: bool,
    /// `Warning` headers to send (unknown fields under `fieldValidation=Warn`).
    pub warnings: Vec<String>,
}

impl Store {
    /// POST: create an object, dropping unknown fields silently.
    pub fn create(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        body: Value,
    ) -> Result<Object, ApiError> {
        self.create_with(rt, ns, body, &WriteOptions::new(FieldValidation::Ignore))
            .map(|w| w.object)
    }

    /// POST: create an object, handling unknown fields as `opts.validation` says; its manager
    /// owns every field.
    pub fn create_with(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        self.create_as(rt, ns, body, opts, Operation::Update)
    }

    /// A create by an update (POST, or PUT of a kind created on update) or by an apply.
    fn create_as(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        body: Value,
        opts: &WriteOptions,
        operation: Operation,
    ) -> Result<Written, ApiError> {
        check_type(rt, &body)?;
        let config = body.clone();
        let (mut obj, warnings) = decode(rt, body, opts.validation)?;
        if obj.metadata.details().resource_version.is_some() {
            // What a real apiserver answers (a 500 from its storage layer): the object was most
            // likely copied from a read, and Kubernetes refuses to create it.
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let name = match (obj.name(), obj.metadata.details().generate_name.as_deref()) {
            (Some(name), _) => name.to_string(),
            (None, Some(prefix)) => {
                let keep = prefix
                    .char_indices()
                    .nth(MAX_GENERATED_PREFIX)
                    .map_or(prefix.len(), |(at, _)| at);
                format!("{}{}", &prefix[..keep], random_suffix())
            }
            (None, None) => {
                return Err(ApiError::invalid(
                    &rt.kind,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            }
        };
        let mut problems = name_problems(rt, &name);
        problems.extend(metadata_problems(&obj.metadata));
        refuse(rt, &name, &problems)?;
        let namespace = if rt.namespaced {
            Some(self.creatable_namespace(rt, ns, &obj)?)
        } else {
            None
        };
        let key = Self::key(rt, namespace.as_deref(), &name);
        let storage = rt.storage();
        if self.stored(&storage, &key).is_some() {
            return Err(ApiError::already_exists(&rt.group_resource(), &name));
        }
        if rt.status_subresource {
            obj.body.remove("status");
        }
        if storage == StorageKey::namespaces() {
            set_body(&mut obj, "status", json!({"phase": "Active"}));
        }
        let m = &mut obj.metadata;
        m.name = Some(name);
        m.namespace = namespace;
        m.details_mut().uid = Some(uuid::Uuid::new_v4().to_string());
        m.details_mut().creation_timestamp = Some(now());
        m.details_mut().generation = Some(1);
        m.details_mut().deletion_timestamp = None;
        m.details_mut()
            .extra
            .shift_remove(super::meta::GRACE_PERIOD);
        Self::validate_schema(rt, &obj)?;
        if storage == StorageKey::crds() {
            self.prepare_crd(&mut obj, None)?;
        }
        let has_owners = obj.metadata.details().owner_references.is_some();
        let stored = self.commit_put(&storage, key, obj);
        let stored_json = stored.to_json();
        let manager = opts.manager(operation, Subresource::Main);
        let mut managed = ManagedFields::default();
        let scope = scope(rt, Subresource::Main);
        match operation {
            Operation::Update => {
                managed.record_update(
                    manager,
                    &rt.api_version(),
                    &Value::Null,
                    &stored_json,
                    scope,
                );
            }
            Operation::Apply => {
                // No other manager exists yet: nothing can conflict.
                let _ = managed.apply(
                    manager,
                    &rt.api_version(),
                    &stored_json,
                    &config,
                    scope,
                    true,
                );
                managed.keep_existing(&stored_json);
            }
        }
        if let Some(uid) = stored.metadata.details().uid.clone() {
            self.managed.insert(uid, managed);
        }
        if has_owners {
            self.collect_garbage();
        }
        Ok(Written {
            object: Self::present(rt, &stored),
            created: true,
            warnings,
        })
    }

    /// The namespace a new object of a namespaced type goes to: the URL's, which the body's
    /// (when given) must match, and which must exist and not be terminating.
    fn creatable_namespace(
        &self,
        rt: &ResourceType,
        url_ns: Option<&str>,
        obj: &Object,
    ) -> Result<String, ApiError> {
        let url_ns = url_ns.unwrap_or("");
        let body_ns = obj.namespace().unwrap_or(url_ns);
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
        match self.stored(&StorageKey::namespaces(), &ObjectKey::new("", url_ns)) {
            None => Err(ApiError::not_found("namespaces", url_ns)),
            Some(n) if n.is_being_deleted() => Err(ApiError::namespace_terminating(url_ns)),
            Some(_) => Ok(url_ns.to_string()),
        }
    }

    /// PUT: replace an object (or its status). Only the kinds Kubernetes creates on update
    /// (Endpoints, Events, Leases) are created when missing.
    pub fn replace(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        body: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let key = Self::key(rt, ns, name);
        check_type(rt, &body)?;
        let (proposed, warnings) = decode(rt, body.clone(), opts.validation)?;
        check_name(rt, &key, &proposed)?;
        let Some(old) = self.stored(&rt.storage(), &key).cloned() else {
            if creates_on_update(rt) && sub == Subresource::Main {
                let mut body = body;
                if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("resourceVersion");
                }
                return self.create_as(rt, ns, body, opts, Operation::Update);
            }
            return Err(ApiError::not_found(&rt.group_resource(), name));
        };
        // Kubernetes turns a uid in a PUT body into a precondition.
        if let Some(want) = proposed.metadata.details().uid.as_deref() {
            check_uid_precondition(rt, &old, want)?;
        }
        check_rv_precondition(rt, &old, &proposed)?;
        check_rv_given_for_custom_update(rt, &proposed)?;
        let ownership = Ownership::Update(opts.manager(Operation::Update, sub));
        let object = self.write_existing(rt, key, old, proposed, sub, ownership)?;
        Ok(Written {
            object,
            created: false,
            warnings,
        })
    }

    /// PATCH (merge, JSON, strategic-as-merge, apply); an apply creates a missing object.
    pub fn patch(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        patch: &Patch,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let key = Self::key(rt, ns, name);
        if let Patch::Apply(applied) = patch {
            check_apply_type(rt, applied)?;
        }
        let Some(old) = self.stored(&rt.storage(), &key).cloned() else {
            if let (Patch::Apply(applied), Subresource::Main) = (patch, sub) {
                let mut body = applied.clone();
                if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                    if let Some(body_name) = m.get("name").and_then(Value::as_str)
                        && !body_name.is_empty()
                        && body_name != name
                    {
                        return Err(ApiError::bad_request(format!(
                            "the name of the object ({body_name}) does not match the name on the URL ({name})"
                        )));
                    }
                    m.insert("name".into(), json!(name));
                } else if let Some(root) = body.as_object_mut() {
                    root.insert("metadata".into(), json!({"name": name}));
                }
                return self.create_as(rt, ns, body, opts, Operation::Apply);
            }
            return Err(ApiError::not_found(&rt.group_resource(), name));
        };
        let (doc, ownership) = match patch {
            Patch::Apply(config) => {
                let mut managed = self.managed_fields(&old);
                let manager = opts.manager(Operation::Apply, sub);
                let live = old.to_json();
                let doc = managed
                    .apply(
                        manager,
                        &rt.api_version(),
                        &live,
                        config,
                        scope(rt, sub),
                        opts.force,
                    )
                    .map_err(|c| conflict_error(&c))?;
                (doc, Ownership::Applied(managed))
            }
            _ => {
                let mut doc = old.to_json();
                patch.apply_to(&mut doc)?;
                (doc, Ownership::Update(opts.manager(Operation::Update, sub)))
            }
        };
        if !doc.is_object() {
            return Err(ApiError::new(
                422,
                "Invalid",
                "the patched object is not a JSON object",
            ));
        }
        check_patched_type(rt, &key, &doc)?;
        let (proposed, warnings) = decode(rt, doc, opts.validation)?;
        check_patched(rt, &key, &old, &proposed)?;
        check_rv_precondition(rt, &old, &proposed)?;
        let object = self.write_existing(rt, key, old, proposed, sub, ownership)?;
        Ok(Written {
            object,
            created: false,
            warnings,
        })
    }

    /// The shared update path: applies the status-subresource rules, keeps system metadata,
    /// bumps generation on spec changes, skips no-op writes and finishes deletions whose last
    /// finalizer went away.
    fn write_existing(
        &mut self,
        rt: &ResourceType,
        key: ObjectKey,
        old: Object,
        proposed: Object,
        sub: Subresource,
        ownership: Ownership,
    ) -> Result<Object, ApiError> {
        let storage = rt.storage();
        let mut new = match sub {
            Subresource::Status => {
                let mut n = old.clone();
                match proposed.body.get("status") {
                    Some(s) if !s.is_null() => set_body(&mut n, "status", s.clone()),
                    _ => {
                        n.body.remove("status");
                    }
                }
                n
            }
            Subresource::Main => {
                let mut n = proposed;
                if rt.status_subresource {
                    match old.body.get("status") {
                        Some(s) => set_body(&mut n, "status", s.clone()),
                        None => {
                            n.body.remove("status");
                        }
                    }
                }
                n
            }
        };
        new.api_version = rt.api_version();
        new.kind.clone_from(&rt.kind);
        keep_system_fields(&old.metadata, &mut new.metadata);
        if old.is_being_deleted() {
            check_no_new_finalizers(rt, &old, &new)?;
        }
        let with_status = rt.crd.is_some() && !rt.status_subresource;
        if spec_changed(&old, &new, with_status) {
            new.metadata.details_mut().generation =
                Some(old.metadata.details().generation.unwrap_or(0) + 1);
        }
        refuse(rt, &key.name, &metadata_problems(&new.metadata))?;
        Self::validate_schema(rt, &new)?;
        if storage == StorageKey::crds() {
            self.prepare_crd(&mut new, Some(&old))?;
        }
        if same_content(&new, &old) {
            self.own(rt, sub, &old, &old, ownership);
            return Ok(Self::present(rt, &old));
        }
        if new.is_being_deleted() && new.metadata.details().finalizers.is_none() {
            let last = self
                .commit_remove(&storage, &key, Some(new.clone()))
                .unwrap_or(new);
            self.collect_garbage();
            return Ok(Self::present(rt, &last));
        }
        // Only a change of owner references can give the collector new work (a dependent
        // whose owners are gone): a status write of an owned object costs no scan of the store.
        let owners_changed =
            new.metadata.details().owner_references != old.metadata.details().owner_references;
        let stored = self.commit_put(&storage, key, new);
        self.own(rt, sub, &old, &stored, ownership);
        if owners_changed {
            self.collect_garbage();
        }
        Ok(Self::present(rt, &stored))
    }

    /// The field ownership of a stored object (none for one the store made itself).
    fn managed_fields(&self, obj: &Object) -> ManagedFields {
        obj.metadata
            .details()
            .uid
            .as_ref()
            .and_then(|uid| self.managed.get(uid))
            .cloned()
            .unwrap_or_default()
    }

    /// Records what a write from `old` to `new` did to field ownership.
    fn own(
        &mut self,
        rt: &ResourceType,
        sub: Subresource,
        old: &Object,
        new: &Object,
        ownership: Ownership,
    ) {
        let Some(uid) = new.metadata.details().uid.clone() else {
            return;
        };
        let new_json = new.to_json();
        let managed = match ownership {
            Ownership::Update(manager) => {
                let mut managed = self.managed_fields(old);
                let scope = scope(rt, sub);
                managed.record_update(manager, &rt.api_version(), &old.to_json(), &new_json, scope);
                managed
            }
            Ownership::Applied(mut managed) => {
                managed.keep_existing(&new_json);
                managed
            }
        };
        self.managed.insert(uid, managed);
    }

    /// 422 naming every required field that is missing and every value that breaks the CRD
    /// version's schema (type, enum, pattern, format, lengths, bounds), or, for a built-in
    /// kind, every problem with its spec (`builtin`).
    fn validate_schema(rt: &ResourceType, obj: &Object) -> Result<(), ApiError> {
        let Some(schema) = &rt.schema else {
            let problems = builtin::spec_problems(rt, &obj.to_json());
            return refuse(rt, obj.name().unwrap_or(""), &problems);
        };
        let json = obj.to_json();
        let mut problems: Vec<FieldProblem> = schema::missing_required(schema, &json)
            .into_iter()
            .map(|field| FieldProblem::new(field, "Required value"))
            .collect();
        problems.extend(schema::violations(schema, &rt.patterns, &json));
        if problems.is_empty() {
            return Ok(());
        }
        Err(ApiError::invalid_fields(
            &rt.qualified_kind(),
            obj.name().unwrap_or(""),
            &problems,
        ))
    }
}

/// Sets a body field; `key` is never one of the reserved keys here.
pub(super) fn set_body(obj: &mut Object, key: &str, value: Value) {
    // `status` and `spec` are not reserved keys, so the insert cannot be refused.
    let _ = obj.body.insert(key, value);
}
