//! Announced model shutdowns (`lifecycle.yaml`, shipped with the crate): `validate`
//! warns ahead of a configured model's shutdown and refuses it after.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::Deserialize;

use crate::types::ModelRef;

const SHIPPED: &str = include_str!("lifecycle.yaml");

/// How long before a shutdown `validate` starts warning.
pub const WARN_DAYS: i64 = 90;

/// One announced shutdown.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retirement {
    pub shutdown: NaiveDate,
    /// `provider/model` the provider recommends instead.
    pub replacement: String,
}

/// The shipped list, by `provider/model`.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    models: BTreeMap<String, Retirement>,
}

/// What `validate` says about one model on one day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Shuts down within [`WARN_DAYS`].
    Retiring(Retirement),
    /// Past its shutdown: the API refuses it.
    Retired(Retirement),
}

impl Lifecycle {
    /// The list shipped with steward. It is checked by a unit test, so a parse error
    /// here cannot ship; an empty list is the fallback all the same.
    pub fn shipped() -> Lifecycle {
        let parsed: BTreeMap<String, BTreeMap<String, Retirement>> =
            serde_yaml::from_str(SHIPPED).unwrap_or_default();
        let models = parsed
            .into_iter()
            .flat_map(|(provider, list)| list.into_iter().map(move |(m, r)| (format!("{provider}/{m}"), r)))
            .collect();
        Lifecycle { models }
    }

    /// The announced shutdown of `model`: listed exactly, or a dated snapshot or alias
    /// (`-2025-04-14`, `-20250219`, `-latest`, `-0`) of a listed name.
    pub fn retirement(&self, model: &ModelRef) -> Option<&Retirement> {
        let key = format!("{}/{}", model.provider, model.model);
        let base = super::prices::snapshot_base(&key)
            .or_else(|| key.strip_suffix("-latest"))
            .or_else(|| key.strip_suffix("-0"));
        self.models.get(&key).or_else(|| self.models.get(base?))
    }

    /// Whether `model` is retiring or retired on `today`.
    pub fn standing(&self, model: &ModelRef, today: NaiveDate) -> Option<Standing> {
        let r = self.retirement(model)?;
        if today >= r.shutdown {
            Some(Standing::Retired(r.clone()))
        } else if (r.shutdown - today).num_days() <= WARN_DAYS {
            Some(Standing::Retiring(r.clone()))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> ModelRef {
        ModelRef::parse(s).unwrap()
    }

    fn day(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    #[test]
    fn the_shipped_list_parses_and_matches_snapshots_not_siblings() {
        let parsed: BTreeMap<String, BTreeMap<String, Retirement>> = serde_yaml::from_str(SHIPPED).unwrap();
        assert!(parsed["openai"].contains_key("gpt-4.1"));
        let l = Lifecycle::shipped();
        assert_eq!(
            l.retirement(&m("openai/gpt-4.1")).unwrap().shutdown,
            day("2027-01-14")
        );
        assert!(l.retirement(&m("openai/gpt-4.1-2025-04-14")).is_some());
        assert!(l.retirement(&m("anthropic/claude-3-7-sonnet-latest")).is_some());
        assert!(l.retirement(&m("anthropic/claude-sonnet-4-20250514")).is_some());
        // A sibling is not a snapshot.
        assert_eq!(
            l.retirement(&m("openai/gpt-4.1-mini")).unwrap().replacement,
            "openai/gpt-6-luna"
        );
        assert!(l.retirement(&m("openai/gpt-5.2")).is_none());
        assert!(l.retirement(&m("openai/gpt-5-pro")).is_none());
        assert!(l.retirement(&m("anthropic/claude-sonnet-4-5")).is_none());
    }

    #[test]
    fn warns_within_ninety_days_and_refuses_after() {
        let l = Lifecycle::shipped();
        let gpt41 = m("openai/gpt-4.1");
        assert_eq!(l.standing(&gpt41, day("2026-10-01")), None);
        assert!(matches!(
            l.standing(&gpt41, day("2026-10-16")),
            Some(Standing::Retiring(_))
        ));
        assert!(matches!(
            l.standing(&gpt41, day("2027-01-14")),
            Some(Standing::Retired(_))
        ));
    }
}
