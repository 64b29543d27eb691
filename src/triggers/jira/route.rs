//! Which Jira rules an event matches.

use crate::config::TriggerSpec;
use crate::config::spec::JiraTrigger;
use crate::triggers::{Origin, TriggerEvent};

use crate::config::trigger::in_list;

/// Whether Jira `rule` matches `event`; `None` when `rule` is not a Jira rule.
pub fn matches(rule: &TriggerSpec, event: &TriggerEvent) -> Option<bool> {
    let TriggerSpec::Jira(JiraTrigger {
        events,
        projects,
        fields,
        ..
    }) = rule
    else {
        return None;
    };
    let Origin::Jira {
        project,
        webhook_event,
        changed_fields,
        ..
    } = &event.origin
    else {
        return Some(false);
    };
    Some(
        in_list(events, webhook_event)
            && in_list(projects, project)
            && (fields.is_empty()
                || changed_fields
                    .iter()
                    .any(|f| fields.iter().any(|w| w.eq_ignore_ascii_case(f)))),
    )
}
