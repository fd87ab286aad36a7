//! [`Package`]: an ordered list of objects, read from and written to multi-document YAML.

use crate::gvk::Gvk;
use crate::object::{Object, ObjectError};
use crate::reference::ObjectRef;
use crate::yaml;
use crate::yaml::limits::{LimitError, YamlLimits};

/// An ordered list of KRM objects — a kpt/TKO package or any multi-document YAML file.
///
/// Order is kept everywhere: documents in the order given, fields in each object in the order
/// given. Lookup is by GVK + name (+ namespace when it matters).
///
/// ```
/// use nephrite_krm::{Gvk, Object, Package};
///
/// let mut package = Package::from_yaml("\
/// apiVersion: topology.nephio.org/v1alpha1
/// kind: Site
/// metadata: {name: hq}
/// spec: {siteId: dc/hq-1}
/// ---
/// ---
/// apiVersion: v1
/// kind: ConfigMap
/// metadata: {name: settings}
/// ")?;
/// assert_eq!(package.len(), 2); // the empty document is skipped
///
/// let config_map = Gvk::new("", "v1", "ConfigMap");
/// let replacement = Object::new(&config_map, "settings").with_label("replaced", "true");
/// let old = package.insert(replacement); // same GVK + name: replaced in place
/// assert!(old.is_some());
/// assert_eq!(package.get(&config_map, "settings").and_then(|o| o.label("replaced")), Some("true"));
///
/// let yaml = package.to_yaml();
/// assert_eq!(Package::from_yaml(&yaml)?, package);
/// # Ok::<(), nephrite_krm::PackageError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Package {
    objects: Vec<Object>,
}

/// Why a YAML stream could not be read as a [`Package`].
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// One document is bad. `index` counts the non-empty documents from 0 (the position the
    /// object would have had in the package); `line` is the 1-based line where the document
    /// starts (its `---` line, or its first content line when it has none).
    #[error("document {index} (starting at line {line}): {source}")]
    Document {
        /// 0-based index of the document among the non-empty documents.
        index: usize,
        /// 1-based line where the document starts.
        line: usize,
        /// What is wrong with it.
        source: DocumentError,
    },
}

impl PackageError {
    /// The 0-based document index.
    pub fn document_index(&self) -> usize {
        match self {
            PackageError::Document { index, .. } => *index,
        }
    }

    /// The 1-based line where the bad document starts.
    pub fn document_line(&self) -> usize {
        match self {
            PackageError::Document { line, .. } => *line,
        }
    }
}

/// What is wrong with one document of a YAML stream.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The text is not valid YAML, or holds something a Kubernetes object (JSON) cannot: a
    /// repeated key, `.nan` / `.inf`, a plain number beyond 64-bit integers or `f64`, an
    /// application tag (`!foo`), a merge key `<<` whose value is not a mapping (or list of
    /// mappings), a byte order mark after the start of the stream. `line` and `column` are 1-based
    /// positions in the whole stream.
    #[error("invalid YAML: {message}")]
    Yaml {
        /// 1-based line of the error in the whole stream.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// The YAML reader's message, with positions in the whole stream.
        message: String,
    },
    /// The document is YAML but not a KRM object (not a mapping, no apiVersion or kind, bad
    /// metadata).
    #[error(transparent)]
    Object(#[from] ObjectError),
}

fn yaml_error(document: &yaml::DocumentText<'_>) -> DocumentError {
    // Parse again behind blank lines so that the reader's positions (and message) are those of
    // the whole stream. Only the failing document pays for this.
    let padded = format!(
        "{}{}",
        "\n".repeat(document.first_line.saturating_sub(1)),
        document.text
    );
    match yaml::document_to_json(&padded) {
        Err(err) => {
            let (line, column) = err
                .location()
                .map_or((document.start_line, 1), |l| (l.line(), l.column()));
            DocumentError::Yaml {
                line,
                column,
                message: err.to_string(),
            }
        }
        Ok(_) => DocumentError::Yaml {
            line: document.start_line,
            column: 1,
            message: "the document could not be read".to_owned(),
        },
    }
}

impl Package {
    /// An empty package.
    pub fn new() -> Self {
        Package::default()
    }

    /// Reads a multi-document YAML stream. Empty documents (a `---` with nothing but blank lines
    /// or comments) are skipped; every other document must be a mapping with `apiVersion` and
    /// `kind` and, if present, a `metadata` mapping of Kubernetes' shape.
    ///
    /// Anchors and aliases are expanded, and so are merge keys (`<<: *base`; explicit keys win).
    /// Mapping keys are strings as written (`1`, `0x1f`, `true` stay `"1"`, `"0x1f"`, `"true"`).
    /// Windows (`\r\n`) and old Mac (`\r`) line breaks and a leading byte order mark are fine;
    /// line numbers count lines as an editor does. Anything JSON cannot hold is an error rather
    /// than a guess (see [`DocumentError::Yaml`]); quote a value to keep it as a string.
    ///
    /// Every document must keep the default [`YamlLimits`] (size and nesting depth), checked
    /// before it is parsed so that a hostile document costs no more than reading it.
    pub fn from_yaml(input: &str) -> Result<Self, PackageError> {
        Self::from_yaml_with_limits(input, &YamlLimits::default())
    }

    /// [`Package::from_yaml`] with other limits for each document. A document over one is a
    /// [`DocumentError::Yaml`] whose message names the limit, at the position it was crossed.
    pub fn from_yaml_with_limits(input: &str, limits: &YamlLimits) -> Result<Self, PackageError> {
        let mut objects = Vec::new();
        for document in yaml::split_documents(input) {
            if !document.has_content {
                continue;
            }
            let fail = |source| PackageError::Document {
                index: objects.len(),
                line: document.start_line,
                source,
            };
            if let Some((line, column)) = yaml::stray_byte_order_mark(&document) {
                return Err(fail(DocumentError::Yaml {
                    line,
                    column,
                    message: format!(
                        "a byte order mark (U+FEFF) at line {line} column {column}: only the start \
                         of the stream may have one (in a string, write it as \"\\uFEFF\")"
                    ),
                }));
            }
            if let Err(limit) = limits.check(document.text) {
                let (line, column) = limit.position().map_or((document.start_line, 1), |(l, c)| {
                    (l + document.first_line - 1, c)
                });
                let message = match limit {
                    LimitError::TooLarge { .. } => limit.to_string(),
                    LimitError::TooDeep { limit, .. } => format!(
                        "collections nest deeper than the limit of {limit} levels at line {line} \
                         column {column}"
                    ),
                };
                return Err(fail(DocumentError::Yaml {
                    line,
                    column,
                    message,
                }));
            }
            let value = match yaml::document_to_json(document.text) {
                Ok(value) => value,
                Err(_) => return Err(fail(yaml_error(&document))),
            };
            let object = Object::from_json(value).map_err(|e| fail(DocumentError::Object(e)))?;
            objects.push(object);
        }
        Ok(Package { objects })
    }

    /// Writes the package as multi-document YAML: documents separated by `---` lines, fields in
    /// order, strings quoted wherever a YAML 1.1 or 1.2 reader could take them for something
    /// else. An empty package is the empty string.
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        for (index, object) in self.objects.iter().enumerate() {
            if index > 0 {
                out.push_str("---\n");
            }
            yaml::write_object(&mut out, object);
        }
        out
    }

    /// The number of objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether there are no objects.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The objects, in order.
    pub fn objects(&self) -> &[Object] {
        &self.objects
    }

    /// The objects as a vector to edit freely.
    pub fn objects_mut(&mut self) -> &mut Vec<Object> {
        &mut self.objects
    }

    /// The objects, by value.
    pub fn into_objects(self) -> Vec<Object> {
        self.objects
    }

    /// Iterates over the objects in order.
    pub fn iter(&self) -> std::slice::Iter<'_, Object> {
        self.objects.iter()
    }

    /// Iterates mutably over the objects in order.
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Object> {
        self.objects.iter_mut()
    }

    /// The objects of type `gvk`, in order.
    pub fn of_type<'a>(&'a self, gvk: &'a Gvk) -> impl Iterator<Item = &'a Object> + 'a {
        self.objects
            .iter()
            .filter(move |o| gvk.matches(&o.api_version, &o.kind))
    }

    /// Index of the first object with this GVK and name, in any namespace.
    pub fn position(&self, gvk: &Gvk, name: &str) -> Option<usize> {
        self.objects
            .iter()
            .position(|o| o.name() == Some(name) && gvk.matches(&o.api_version, &o.kind))
    }

    /// Index of the object with this GVK, namespace (`None`: no namespace) and name.
    pub fn position_namespaced(
        &self,
        gvk: &Gvk,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<usize> {
        self.objects.iter().position(|o| {
            o.name() == Some(name)
                && o.namespace() == namespace
                && gvk.matches(&o.api_version, &o.kind)
        })
    }

    /// The first object with this GVK and name, in any namespace.
    pub fn get(&self, gvk: &Gvk, name: &str) -> Option<&Object> {
        self.position(gvk, name).map(|i| &self.objects[i])
    }

    /// The first object with this GVK and name, in any namespace, to edit.
    pub fn get_mut(&mut self, gvk: &Gvk, name: &str) -> Option<&mut Object> {
        let index = self.position(gvk, name)?;
        self.objects.get_mut(index)
    }

    /// The object with this GVK, namespace (`None`: no namespace) and name.
    pub fn get_namespaced(
        &self,
        gvk: &Gvk,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<&Object> {
        self.position_namespaced(gvk, namespace, name)
            .map(|i| &self.objects[i])
    }

    /// The object with this GVK, namespace and name, to edit.
    pub fn get_namespaced_mut(
        &mut self,
        gvk: &Gvk,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<&mut Object> {
        let index = self.position_namespaced(gvk, namespace, name)?;
        self.objects.get_mut(index)
    }

    /// The object a reference names (GVK, namespace exactly, name; the uid is not compared).
    pub fn get_by_ref(&self, reference: &ObjectRef) -> Option<&Object> {
        self.get_namespaced(
            &reference.gvk,
            reference.namespace.as_deref(),
            &reference.name,
        )
    }

    /// Appends an object, even if one with the same identity exists.
    pub fn push(&mut self, object: Object) {
        self.objects.push(object);
    }

    /// Inserts by identity (GVK + namespace + name): an existing object with the same identity is
    /// replaced in place and returned; otherwise the object is appended and `None` is returned.
    pub fn insert(&mut self, object: Object) -> Option<Object> {
        let index = self.position_namespaced(
            &object.gvk(),
            object.namespace(),
            object.name().unwrap_or_default(),
        );
        match index {
            Some(index) => Some(std::mem::replace(&mut self.objects[index], object)),
            None => {
                self.objects.push(object);
                None
            }
        }
    }

    /// Inserts an object at `index` (clamped to the length), shifting later objects.
    pub fn insert_at(&mut self, index: usize, object: Object) {
        let index = index.min(self.objects.len());
        self.objects.insert(index, object);
    }

    /// Removes and returns the first object with this GVK and name, in any namespace.
    pub fn remove(&mut self, gvk: &Gvk, name: &str) -> Option<Object> {
        let index = self.position(gvk, name)?;
        Some(self.objects.remove(index))
    }

    /// Removes and returns the object with this GVK, namespace and name.
    pub fn remove_namespaced(
        &mut self,
        gvk: &Gvk,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Object> {
        let index = self.position_namespaced(gvk, namespace, name)?;
        Some(self.objects.remove(index))
    }

    /// Keeps only the objects for which `keep` returns true, in order.
    pub fn retain(&mut self, keep: impl FnMut(&Object) -> bool) {
        self.objects.retain(keep);
    }
}

impl From<Vec<Object>> for Package {
    fn from(objects: Vec<Object>) -> Self {
        Package { objects }
    }
}

impl FromIterator<Object> for Package {
    fn from_iter<I: IntoIterator<Item = Object>>(iter: I) -> Self {
        Package {
            objects: iter.into_iter().collect(),
        }
    }
}

impl Extend<Object> for Package {
    fn extend<I: IntoIterator<Item = Object>>(&mut self, iter: I) {
        self.objects.extend(iter);
    }
}

impl IntoIterator for Package {
    type Item = Object;
    type IntoIter = std::vec::IntoIter<Object>;
    fn into_iter(self) -> Self::IntoIter {
        self.objects.into_iter()
    }
}

impl<'a> IntoIterator for &'a Package {
    type Item = &'a Object;
    type IntoIter = std::slice::Iter<'a, Object>;
    fn into_iter(self) -> Self::IntoIter {
        self.objects.iter()
    }
}

impl<'a> IntoIterator for &'a mut Package {
    type Item = &'a mut Object;
    type IntoIter = std::slice::IterMut<'a, Object>;
    fn into_iter(self) -> Self::IntoIter {
        self.objects.iter_mut()
    }
}

#[cfg(test)]
mod tests;
