//! The deployment filter both dashboards offer: template, site and metadata patterns (the Data
//! API's `*` / `**`), parent, prepared and approved state, and free text. The terminal UI reads
//! it from one line (`template=cu-* prepared=no region=eu-*`), the web page from its form
//! fields; both end up here, so they filter alike.

use std::collections::BTreeMap;
use std::fmt;

use nephrite_merge::IdPattern;

use super::model::DeploymentRow;

/// Yes, no or either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tristate {
    /// Either.
    #[default]
    Any,
    /// Only true.
    Yes,
    /// Only false.
    No,
}

impl Tristate {
    /// `yes`/`true`, `no`/`false`, or empty / `any` for either.
    pub fn parse(text: &str) -> Option<Tristate> {
        match text.trim().to_ascii_lowercase().as_str() {
            "" | "any" => Some(Tristate::Any),
            "yes" | "true" | "y" => Some(Tristate::Yes),
            "no" | "false" | "n" => Some(Tristate::No),
            _ => None,
        }
    }

    fn admits(self, value: bool) -> bool {
        match self {
            Tristate::Any => true,
            Tristate::Yes => value,
            Tristate::No => !value,
        }
    }

    /// `yes`, `no` or `any`.
    pub fn as_str(self) -> &'static str {
        match self {
            Tristate::Any => "any",
            Tristate::Yes => "yes",
            Tristate::No => "no",
        }
    }
}

/// A term the filter could not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// A pattern that is not a valid `*` / `**` pattern.
    #[error("{field} pattern {pattern:?}: {reason}")]
    BadPattern {
        /// `template`, `site` or the metadata key.
        field: String,
        /// The pattern given.
        pattern: String,
        /// Why it was refused.
        reason: String,
    },
    /// A state that is not yes / no / any.
    #[error("{field}={value:?}: expected yes, no or any")]
    BadState {
        /// `prepared` or `approved`.
        field: &'static str,
        /// The value given.
        value: String,
    },
}

/// Which deployments to show; the default shows every one.
#[derive(Debug, Clone, Default)]
pub struct DeploymentFilter {
    template: Option<IdPattern>,
    site: Option<IdPattern>,
    parent: Option<String>,
    prepared: Tristate,
    approved: Tristate,
    metadata: BTreeMap<String, IdPattern>,
    text: Vec<String>,
}

fn pattern(field: &str, text: &str) -> Result<IdPattern, FilterError> {
    IdPattern::parse_value(text).map_err(|e| FilterError::BadPattern {
        field: field.to_owned(),
        pattern: text.to_owned(),
        reason: e.to_string(),
    })
}

fn state(field: &'static str, value: &str) -> Result<Tristate, FilterError> {
    Tristate::parse(value).ok_or_else(|| FilterError::BadState {
        field,
        value: value.to_owned(),
    })
}

impl DeploymentFilter {
    /// Reads the one-line form: space-separated `template=PATTERN`, `site=PATTERN`,
    /// `parent=ID`, `prepared=yes|no`, `approved=yes|no`, `KEY=PATTERN` (metadata; `meta.KEY=`
    /// for a key named like one of the others), and words that must occur in the id, template
    /// or site.
    pub fn parse(line: &str) -> Result<DeploymentFilter, FilterError> {
        let mut filter = DeploymentFilter::default();
        for term in line.split_whitespace() {
            match term.split_once('=') {
                None => filter.text.push(term.to_owned()),
                Some((key, value)) => filter.set(key, value)?,
            }
        }
        Ok(filter)
    }

    /// Sets one field by name (the names of [`DeploymentFilter::parse`]); an empty value
    /// clears it.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), FilterError> {
        let value = value.trim();
        match key {
            "template" => {
                self.template = (!value.is_empty())
                    .then(|| pattern("template", value))
                    .transpose()?;
            }
            "site" => {
                self.site = (!value.is_empty())
                    .then(|| pattern("site", value))
                    .transpose()?;
            }
            "parent" => self.parent = (!value.is_empty()).then(|| value.to_owned()),
            "prepared" => self.prepared = state("prepared", value)?,
            "approved" => self.approved = state("approved", value)?,
            _ => {
                let key = key.strip_prefix("meta.").unwrap_or(key);
                if value.is_empty() {
                    self.metadata.remove(key);
                } else {
                    self.metadata.insert(key.to_owned(), pattern(key, value)?);
                }
            }
        }
        Ok(())
    }

    /// Adds words that must each occur in the id, template or site.
    pub fn set_text(&mut self, text: &str) {
        self.text = text.split_whitespace().map(str::to_owned).collect();
    }

    /// Whether `row` passes.
    pub fn matches(&self, row: &DeploymentRow) -> bool {
        self.prepared.admits(row.prepared)
            && self.approved.admits(row.approved)
            && self.parent.as_ref().is_none_or(|p| *p == row.parent_id)
            && self
                .template
                .as_ref()
                .is_none_or(|p| p.matches(&row.template_id))
            && self.site.as_ref().is_none_or(|p| p.matches(&row.site_id))
            && self
                .metadata
                .iter()
                .all(|(key, p)| row.metadata.get(key).is_some_and(|value| p.matches(value)))
            && self.text.iter().all(|word| {
                row.id.contains(word.as_str())
                    || row.template_id.contains(word.as_str())
                    || row.site_id.contains(word.as_str())
            })
    }

    /// Whether it lets every deployment through.
    pub fn is_empty(&self) -> bool {
        self.to_string().is_empty()
    }

    /// The template pattern, if any.
    pub fn template(&self) -> Option<&str> {
        self.template.as_ref().map(IdPattern::as_str)
    }

    /// The site pattern, if any.
    pub fn site(&self) -> Option<&str> {
        self.site.as_ref().map(IdPattern::as_str)
    }

    /// The parent, if any.
    pub fn parent(&self) -> Option<&str> {
        self.parent.as_deref()
    }

    /// The prepared state asked for.
    pub fn prepared(&self) -> Tristate {
        self.prepared
    }

    /// The approved state asked for.
    pub fn approved(&self) -> Tristate {
        self.approved
    }

    /// The metadata patterns as `KEY=PATTERN` terms.
    pub fn metadata_terms(&self) -> String {
        let terms: Vec<String> = self
            .metadata
            .iter()
            .map(|(k, p)| format!("{k}={}", p.as_str()))
            .collect();
        terms.join(" ")
    }

    /// The free-text words.
    pub fn text(&self) -> String {
        self.text.join(" ")
    }
}

/// The one-line form [`DeploymentFilter::parse`] reads back.
impl fmt::Display for DeploymentFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut terms: Vec<String> = Vec::new();
        if let Some(p) = &self.template {
            terms.push(format!("template={}", p.as_str()));
        }
        if let Some(p) = &self.site {
            terms.push(format!("site={}", p.as_str()));
        }
        if let Some(p) = &self.parent {
            terms.push(format!("parent={p}"));
        }
        if self.prepared != Tristate::Any {
            terms.push(format!("prepared={}", self.prepared.as_str()));
        }
        if self.approved != Tristate::Any {
            terms.push(format!("approved={}", self.approved.as_str()));
        }
        for (key, p) in &self.metadata {
            let reserved = matches!(
                key.as_str(),
                "template" | "site" | "parent" | "prepared" | "approved"
            ) || key.starts_with("meta.");
            let key = if reserved {
                format!("meta.{key}")
            } else {
                key.clone()
            };
            terms.push(format!("{key}={}", p.as_str()));
        }
        terms.extend(self.text.iter().cloned());
        f.write_str(&terms.join(" "))
    }
}
