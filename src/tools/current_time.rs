//! `current_time`: the date and time, optionally in an IANA time zone.

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{Effect, Tool, ToolCtx, ToolError, ToolOutput, ToolResult, ToolSpec};

pub struct CurrentTime {
    spec: ToolSpec,
}

impl CurrentTime {
    pub fn new() -> Self {
        CurrentTime {
            spec: ToolSpec {
                name: "current_time".into(),
                description: "Returns the current date, time and weekday (RFC 3339). Pass an IANA time zone such as America/Los_Angeles to get local time; defaults to UTC.".into(),
                parameters: super::args::schema_of::<TimeArgs>(),
                effect: Effect::ReadOnly,
            },
        }
    }
}

impl Default for CurrentTime {
    fn default() -> Self {
        CurrentTime::new()
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TimeArgs {
    /// IANA time zone name, e.g. Europe/Berlin
    timezone: Option<String>,
}

/// Formats `now` in the zone named by `args.timezone` (UTC when absent).
fn render(now: DateTime<Utc>, args: Value) -> ToolResult {
    let args: TimeArgs = super::args::parse(args)?;
    let Some(name) = args.timezone.as_deref() else {
        return Ok(ToolOutput::text(format!(
            "{} ({}, UTC)",
            now.to_rfc3339(),
            now.format("%A")
        )));
    };
    let tz: chrono_tz::Tz = name.parse().map_err(|_| {
        ToolError::Model(format!(
            "unknown time zone '{name}', expected an IANA name such as Europe/Berlin"
        ))
    })?;
    let local = tz.from_utc_datetime(&now.naive_utc());
    Ok(ToolOutput::text(format!(
        "{} ({}, {name})",
        local.to_rfc3339(),
        local.format("%A")
    )))
}

#[async_trait]
impl Tool for CurrentTime {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    /// The time moves on: every call asks again.
    fn repeatable(&self) -> bool {
        false
    }

    async fn call(&self, _ctx: &ToolCtx, args: Value) -> ToolResult {
        render(Utc::now(), args)
    }

    /// A fixed Monday morning, so evals are reproducible.
    async fn mock(&self, _ctx: &ToolCtx, args: Value) -> ToolResult {
        let fixed = Utc
            .with_ymd_and_hms(2026, 1, 5, 17, 0, 0)
            .single()
            .unwrap_or_default();
        render(fixed, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_in_a_zone() {
        let t = Utc.with_ymd_and_hms(2026, 1, 5, 17, 0, 0).unwrap();
        let out = render(t, json!({"timezone": "America/Los_Angeles"})).unwrap();
        assert_eq!(
            out.to_model_text(),
            "2026-01-05T09:00:00-08:00 (Monday, America/Los_Angeles)"
        );
        let out = render(t, json!({})).unwrap();
        assert_eq!(out.to_model_text(), "2026-01-05T17:00:00+00:00 (Monday, UTC)");
        assert!(render(t, json!({"timezone": "Mars/Olympus"})).is_err());
    }
}
