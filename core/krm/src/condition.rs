//! Status conditions (`status.conditions[]`) and the helpers that maintain a list of them.
//!
//! Times are strings chosen by the caller (RFC 3339, e.g. `2024-05-01T12:00:00Z`); nothing here
//! reads a clock.
//!
//! ```
//! use nephrite_krm::condition::{find_condition, is_condition_true, set_condition};
//! use nephrite_krm::{Condition, ConditionStatus};
//!
//! let mut conditions = Vec::new();
//! set_condition(&mut conditions, Condition::new("Ready", ConditionStatus::False), "2024-05-01T12:00:00Z");
//! // Same status again: lastTransitionTime is kept.
//! let ready = Condition::new("Ready", ConditionStatus::False).with_reason("Waiting");
//! assert!(set_condition(&mut conditions, ready, "2024-05-01T12:05:00Z"));
//! assert_eq!(find_condition(&conditions, "Ready").unwrap().last_transition_time.as_deref(), Some("2024-05-01T12:00:00Z"));
//! // Status changes: lastTransitionTime becomes `now`.
//! set_condition(&mut conditions, Condition::new("Ready", ConditionStatus::True), "2024-05-01T12:10:00Z");
//! assert!(is_condition_true(&conditions, "Ready"));
//! assert_eq!(conditions[0].last_transition_time.as_deref(), Some("2024-05-01T12:10:00Z"));
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The status of a [`Condition`]: `"True"`, `"False"` or `"Unknown"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// It is not known whether the condition holds.
    Unknown,
}

impl ConditionStatus {
    /// The wire spelling: `True`, `False` or `Unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(holds: bool) -> Self {
        if holds {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of `status.conditions`, in the shape of Kubernetes' `metav1.Condition`. Fields it
/// does not know (e.g. Cluster API's `severity`) are kept in [`Condition::extra`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type, e.g. `Ready`; unique within a list.
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// The `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When `status` last changed, as given by the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// A CamelCase reason for the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Fields not listed above, in their original order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Condition {
    /// A condition with only a type and status.
    pub fn new(type_: impl Into<String>, status: ConditionStatus) -> Self {
        Condition {
            type_: type_.into(),
            status,
            observed_generation: None,
            last_transition_time: None,
            reason: None,
            message: None,
            extra: Map::new(),
        }
    }

    /// The same condition with a reason.
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// The same condition with a message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// The same condition with an observed generation.
    pub fn with_observed_generation(mut self, generation: i64) -> Self {
        self.observed_generation = Some(generation);
        self
    }

    /// Whether the status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == ConditionStatus::True
    }
}

/// Sets `condition` in `conditions`, replacing the entry of the same type in place or appending.
///
/// `lastTransitionTime` is kept from the existing entry when the status is unchanged and set to
/// `now` when the status changes or the condition is new (a new condition that already carries a
/// time keeps it). All other fields come from `condition`. Returns whether the list changed.
pub fn set_condition(conditions: &mut Vec<Condition>, mut condition: Condition, now: &str) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        None => {
            if condition.last_transition_time.is_none() {
                condition.last_transition_time = Some(now.to_owned());
            }
            conditions.push(condition);
            true
        }
        Some(existing) => {
            condition.last_transition_time = if existing.status != condition.status {
                Some(now.to_owned())
            } else {
                existing
                    .last_transition_time
                    .clone()
                    .or_else(|| Some(now.to_owned()))
            };
            let changed = *existing != condition;
            *existing = condition;
            changed
        }
    }
}

/// The condition of type `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of type `type_` is present with status `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(Condition::is_true)
}

/// Removes the condition of type `type_`, returning it.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> Option<Condition> {
    let index = conditions.iter().position(|c| c.type_ == type_)?;
    Some(conditions.remove(index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_condition_gets_now_unless_given() {
        let mut list = Vec::new();
        assert!(set_condition(
            &mut list,
            Condition::new("A", ConditionStatus::Unknown),
            "t1"
        ));
        let mut given = Condition::new("B", ConditionStatus::True);
        given.last_transition_time = Some("t0".into());
        assert!(set_condition(&mut list, given, "t1"));
        assert_eq!(list[0].last_transition_time.as_deref(), Some("t1"));
        assert_eq!(list[1].last_transition_time.as_deref(), Some("t0"));
    }

    #[test]
    fn unchanged_status_keeps_time_and_reports_no_change() {
        let mut list = Vec::new();
        set_condition(
            &mut list,
            Condition::new("A", ConditionStatus::True).with_reason("R"),
            "t1",
        );
        assert!(!set_condition(
            &mut list,
            Condition::new("A", ConditionStatus::True).with_reason("R"),
            "t2"
        ));
        assert_eq!(list[0].last_transition_time.as_deref(), Some("t1"));
        assert!(set_condition(
            &mut list,
            Condition::new("A", ConditionStatus::True).with_message("m"),
            "t3"
        ));
        assert_eq!(list[0].last_transition_time.as_deref(), Some("t1"));
        assert_eq!(list[0].message.as_deref(), Some("m"));
        assert_eq!(list[0].reason, None);
    }

    #[test]
    fn changed_status_takes_now_and_keeps_position() {
        let mut list = Vec::new();
        set_condition(&mut list, Condition::new("A", ConditionStatus::False), "t1");
        set_condition(&mut list, Condition::new("B", ConditionStatus::False), "t1");
        assert!(set_condition(
            &mut list,
            Condition::new("A", ConditionStatus::True),
            "t2"
        ));
        assert_eq!(list[0].type_, "A");
        assert_eq!(list[0].last_transition_time.as_deref(), Some("t2"));
        assert!(is_condition_true(&list, "A"));
        assert!(!is_condition_true(&list, "B"));
        assert!(!is_condition_true(&list, "C"));
        assert_eq!(
            remove_condition(&mut list, "A").map(|c| c.type_),
            Some("A".into())
        );
        assert_eq!(list.len(), 1);
        assert!(remove_condition(&mut list, "A").is_none());
    }

    #[test]
    fn serde_shape() {
        let json = serde_json::json!({
            "type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z",
            "observedGeneration": 3, "reason": "Done", "message": "ok", "severity": "Info"
        });
        let c: Condition = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(c.status, ConditionStatus::True);
        assert_eq!(c.extra["severity"], "Info");
        assert_eq!(serde_json::to_value(&c).unwrap(), json);
        assert!(
            serde_json::from_value::<Condition>(serde_json::json!({"type": "X", "status": "true"}))
                .is_err()
        );
    }
}
