//! Model retirement as the providers announce it: once a day `serve` asks each
//! configured provider that lists shutdown dates (OpenAI's `GET /v1/models`) about the
//! models the config uses, logs every one with a date, and exports the date as
//! `steward_model_shutdown_timestamp_seconds`. The shipped lifecycle file (checked by
//! `validate` and at start) covers what was known at release; this covers what a
//! provider announces later.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::provider::ProviderSet;

/// How often the providers are asked.
pub const EVERY: Duration = Duration::from_secs(24 * 60 * 60);

/// Asks now, then every [`EVERY`], until `shutdown`.
pub async fn watch(
    providers: ProviderSet,
    config: Arc<Config>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        tokio::select! {
            _ = check(&providers, &config, &metrics, chrono::Utc::now().date_naive()) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

/// One round: every configured model of every provider with a list; what was found
/// goes to the log and the metric. Returns `(provider, model, date)` for each model
/// with a shutdown date.
pub async fn check(
    providers: &ProviderSet,
    config: &Config,
    metrics: &Metrics,
    today: chrono::NaiveDate,
) -> Vec<(String, String, chrono::NaiveDate)> {
    let used: BTreeSet<(String, String)> = config
        .agents
        .values()
        .chain(config.subagents.values())
        .flat_map(|a| a.models.iter())
        .map(|m| (m.provider.clone(), m.model.clone()))
        .collect();
    let mut found = Vec::new();
    for (name, provider) in providers.configured() {
        if !used.iter().any(|(p, _)| p == name) {
            continue;
        }
        let dates = match provider.shutdown_dates().await {
            Ok(Some(dates)) => dates,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(provider = name, error = %e, "cannot read the provider's model list for shutdown dates");
                continue;
            }
        };
        for (_, model) in used.iter().filter(|(p, _)| p == name) {
            let Some(Some(date)) = dates.get(model) else {
                continue;
            };
            metrics.model_shutdown(name, model, *date);
            let days = (*date - today).num_days();
            if days < 0 {
                tracing::error!(provider = name, model = %model, shutdown_date = %date, "the provider lists this configured model as shut down; its runs fail: move its agents to a current model");
            } else {
                tracing::warn!(provider = name, model = %model, shutdown_date = %date, days, "the provider announces a shutdown date for this configured model");
            }
            found.push((name.to_string(), model.clone(), *date));
        }
    }
    found
}
