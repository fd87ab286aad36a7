//! [`Body`]: the top-level fields of an object other than `apiVersion`, `kind` and `metadata`.
//!
//! An [`Object`](crate::Object) keeps those three as typed fields and everything else here.
//! If the body could hold a `kind` too, the object would have two of them and whichever was
//! written last would win; so the type refuses them: reading goes through `Deref` to the JSON
//! map, and every way in ([`Body::insert`], [`Body::try_from`]) checks the key.
//!
//! Bodies are shared until changed: cloning an object (a template copied for each child, a
//! merged resource copied out of its merge package) shares the body's map, and the first
//! change to a shared body copies it. A body is usually most of an object, so copies of
//! packages cost a few small allocations per resource instead of one per key and value.

use std::ops::Deref;
use std::sync::Arc;

use serde_json::map::Entry;
use serde_json::{Map, Value};

/// The keys a [`Body`] never holds: they live in [`Object`](crate::Object)'s own fields.
pub const RESERVED_KEYS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// The body of an object: every top-level field but `apiVersion`, `kind` and `metadata`, in
/// order. Read it as a JSON map (it derefs to one); change it with [`insert`](Body::insert),
/// [`get_mut`](Body::get_mut), [`entry_mapping`](Body::entry_mapping) and
/// [`remove`](Body::remove). Clones share the map until one of them changes it.
///
/// ```
/// use nephrite_krm::Body;
/// use serde_json::json;
///
/// let mut body = Body::default();
/// body.insert("data", json!({"mtu": "9000"}))?;
/// assert_eq!(body["data"]["mtu"], "9000");
/// assert!(body.insert("kind", json!("ConfigMap")).is_err());
/// # Ok::<(), nephrite_krm::ReservedKey>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Body(Arc<Map<String, Value>>);

/// A body was asked to hold `apiVersion`, `kind` or `metadata`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key:?} is not a body field: set the object's own field instead")]
pub struct ReservedKey {
    /// The key refused.
    pub key: String,
}

fn check(key: &str) -> Result<(), ReservedKey> {
    if RESERVED_KEYS.contains(&key) {
        Err(ReservedKey {
            key: key.to_owned(),
        })
    } else {
        Ok(())
    }
}

impl Body {
    /// Sets `key` to `value`, keeping its position when it exists (appended otherwise); returns
    /// the value it replaced. Refuses the reserved keys.
    pub fn insert(
        &mut self,
        key: impl Into<String>,
        value: Value,
    ) -> Result<Option<Value>, ReservedKey> {
        let key = key.into();
        check(&key)?;
        Ok(self.map_mut().insert(key, value))
    }

    /// The value of `key`, to edit in place.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        // A shared map is copied only when the key is there to change.
        if Arc::get_mut(&mut self.0).is_none() && !self.0.contains_key(key) {
            return None;
        }
        self.map_mut().get_mut(key)
    }

    /// Every value, to edit in place (keys stay as they are).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Value> {
        self.map_mut().values_mut()
    }

    /// Removes `key`, keeping the order of the others; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        if Arc::get_mut(&mut self.0).is_none() && !self.0.contains_key(key) {
            return None;
        }
        self.map_mut().shift_remove(key)
    }

    /// The value of `key`, set to `default()` first when absent. Refuses the reserved keys.
    pub fn entry_or_insert_with(
        &mut self,
        key: &str,
        default: impl FnOnce() -> Value,
    ) -> Result<&mut Value, ReservedKey> {
        check(key)?;
        Ok(match self.map_mut().entry(key) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => entry.insert(default()),
        })
    }

    /// The value of `key`, an empty mapping inserted when absent (for `spec`, `status`, …).
    /// Refuses the reserved keys.
    pub fn entry_mapping(&mut self, key: &str) -> Result<&mut Value, ReservedKey> {
        self.entry_or_insert_with(key, || Value::Object(Map::new()))
    }

    /// A body from a map its caller has already taken the reserved keys out of (the object
    /// reader does, field by field); any left are dropped rather than kept twice.
    pub(super) fn without_reserved_keys(mut map: Map<String, Value>) -> Self {
        for key in RESERVED_KEYS {
            map.shift_remove(key);
        }
        Body(Arc::new(map))
    }

    /// The fields as a JSON map (copied only if another object still shares them).
    pub fn into_map(self) -> Map<String, Value> {
        Arc::unwrap_or_clone(self.0)
    }

    /// The map, to change: copied first if another object shares it.
    fn map_mut(&mut self) -> &mut Map<String, Value> {
        Arc::make_mut(&mut self.0)
    }

    /// Whether `self` and `other` are one shared map (what a copy saves, for the tests).
    #[cfg(test)]
    pub(crate) fn shares_with(&self, other: &Body) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Deref for Body {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        &self.0
    }
}

impl TryFrom<Map<String, Value>> for Body {
    type Error = ReservedKey;

    /// Takes a map that holds none of the reserved keys.
    fn try_from(map: Map<String, Value>) -> Result<Self, ReservedKey> {
        if let Some(key) = RESERVED_KEYS.iter().find(|k| map.contains_key(**k)) {
            return Err(ReservedKey {
                key: (*key).to_owned(),
            });
        }
        Ok(Body(Arc::new(map)))
    }
}

impl<'a> IntoIterator for &'a Body {
    type Item = (&'a String, &'a Value);
    type IntoIter = serde_json::map::Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl From<Body> for Map<String, Value> {
    fn from(body: Body) -> Self {
        body.into_map()
    }
}
