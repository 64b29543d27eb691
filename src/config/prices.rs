//! Model prices: a data file shipped with the crate (`src/config/prices.yaml`),
//! overridden or extended per deployment by `prices.yaml` at the config root. Models
//! match exactly or as a dated snapshot of a listed model, never by prefix, so a new
//! model never borrows an older family's price: a model with no price has an unknown
//! cost, never 0.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::diagnostic::Diagnostic;
use crate::types::Usage;

/// The price list shipped with steward.
const SHIPPED: &str = include_str!("prices.yaml");
/// The deployment's own prices, relative to the config root.
pub const FILE: &str = "prices.yaml";

/// One model's entry in a price file. (Not built by flattening a shared rates struct:
/// serde cannot refuse unknown keys through `flatten`, and a misspelt rate must be an
/// error rather than a silent default.)
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceSpec {
    input: f64,
    output: f64,
    cache_read: Option<f64>,
    /// One rate for every cache write (OpenAI bills writes at one rate).
    cache_write: Option<f64>,
    cache_write_5m: Option<f64>,
    cache_write_1h: Option<f64>,
    reasoning: Option<f64>,
    long_context: Option<TierSpec>,
}

/// The rates above `above` input tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct TierSpec {
    above: u64,
    input: f64,
    output: f64,
    cache_read: Option<f64>,
    cache_write: Option<f64>,
    cache_write_5m: Option<f64>,
    cache_write_1h: Option<f64>,
    reasoning: Option<f64>,
}

/// USD per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write_5m: f64,
    pub cache_write_1h: f64,
    pub reasoning: f64,
}

impl Rates {
    /// Rates with the defaults filled in: cache reads and writes at the input rate,
    /// a one-hour write at the five-minute one, reasoning at the output rate.
    fn new(
        input: f64,
        output: f64,
        cache_read: Option<f64>,
        cache_write_5m: Option<f64>,
        cache_write_1h: Option<f64>,
        reasoning: Option<f64>,
    ) -> Rates {
        Rates {
            input,
            output,
            cache_read: cache_read.unwrap_or(input),
            cache_write_5m: cache_write_5m.unwrap_or(input),
            cache_write_1h: cache_write_1h.or(cache_write_5m).unwrap_or(input),
            reasoning: reasoning.unwrap_or(output),
        }
    }
}

/// One model's price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub rates: Rates,
    /// Requests with more input tokens than this bill every token at the tier's rates.
    pub long_context: Option<(u64, Rates)>,
}

/// What one call cost, and what it would have cost with no prompt cache.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Bill {
    pub cost_usd: f64,
    pub uncached_usd: f64,
}

impl Bill {
    /// What the prompt cache saved (negative when a write cost more than reads saved).
    pub fn saved_usd(&self) -> f64 {
        self.uncached_usd - self.cost_usd
    }
}

impl Price {
    /// The bill for `usage` (cache writes at the one-hour rate when `long_ttl`).
    pub fn bill(&self, usage: &Usage, long_ttl: bool) -> Bill {
        let r = match self.long_context {
            Some((above, tier)) if usage.input_tokens > above => tier,
            _ => self.rates,
        };
        let write = if long_ttl {
            r.cache_write_1h
        } else {
            r.cache_write_5m
        };
        let uncached_in = usage
            .input_tokens
            .saturating_sub(usage.cached_input_tokens)
            .saturating_sub(usage.cache_write_tokens);
        let visible_out = usage.output_tokens.saturating_sub(usage.reasoning_tokens);
        let output = visible_out as f64 * r.output + usage.reasoning_tokens as f64 * r.reasoning;
        let m = 1_000_000.0;
        Bill {
            cost_usd: (uncached_in as f64 * r.input
                + usage.cached_input_tokens as f64 * r.cache_read
                + usage.cache_write_tokens as f64 * write
                + output)
                / m,
            uncached_usd: (usage.input_tokens as f64 * r.input + output) / m,
        }
    }
}

/// Prices by `provider/model`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    models: BTreeMap<String, Price>,
}

impl Prices {
    /// The shipped list (a test proves it parses; were it broken, every cost would
    /// read unknown rather than wrong).
    pub fn shipped() -> Prices {
        let mut prices = Prices::default();
        if let Err(e) = prices.merge(SHIPPED) {
            tracing::error!(error = %e, "the shipped price list does not parse");
        }
        prices
    }

    /// The shipped list with the deployment's `prices.yaml` over it, when there is one.
    pub fn load(root: &Path) -> Result<Prices, Diagnostic> {
        let mut prices = Prices::shipped();
        let path = root.join(FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(prices),
            Err(e) => {
                return Err(Diagnostic::new(
                    Path::new(FILE),
                    1,
                    1,
                    format!("cannot read: {e}"),
                ));
            }
        };
        prices
            .merge(&text)
            .map_err(|e| Diagnostic::from_yaml(Path::new(FILE), &e))?;
        if let Some((model, _)) = prices.models.iter().find(|(_, p)| !p.is_sane()) {
            return Err(Diagnostic::new(
                Path::new(FILE),
                1,
                1,
                format!("{model}: prices must be finite and not negative"),
            ));
        }
        Ok(prices)
    }

    /// Adds or replaces the models listed in `yaml` (`provider: {model: price}`).
    fn merge(&mut self, yaml: &str) -> Result<(), serde_yaml::Error> {
        // Bounded first (aliases); then typed from the text, for errors' locations.
        super::yaml::value(yaml)?;
        let list: BTreeMap<String, BTreeMap<String, PriceSpec>> = serde_yaml::from_str(yaml)?;
        for (provider, models) in list {
            for (model, spec) in models {
                let s = spec;
                let price = Price {
                    rates: Rates::new(
                        s.input,
                        s.output,
                        s.cache_read,
                        s.cache_write_5m.or(s.cache_write),
                        s.cache_write_1h.or(s.cache_write),
                        s.reasoning,
                    ),
                    long_context: s.long_context.map(|t| {
                        let rates = Rates::new(
                            t.input,
                            t.output,
                            t.cache_read,
                            t.cache_write_5m.or(t.cache_write),
                            t.cache_write_1h.or(t.cache_write),
                            t.reasoning,
                        );
                        (t.above, rates)
                    }),
                };
                self.models.insert(format!("{provider}/{model}"), price);
            }
        }
        Ok(())
    }

    /// The price of `provider/model`: listed exactly, or a dated snapshot of a listed
    /// model (`-2025-04-14`, `-20250929`).
    pub fn price(&self, provider: &str, model: &str) -> Option<&Price> {
        let key = format!("{provider}/{model}");
        if let Some(p) = self.models.get(&key) {
            return Some(p);
        }
        self.models.get(snapshot_base(&key)?)
    }
}

/// The name a dated snapshot is of: `gpt-4.1` for `gpt-4.1-2025-04-14`,
/// `claude-sonnet-4-5` for `claude-sonnet-4-5-20250929`; `None` for a name without a
/// date at its end.
pub fn snapshot_base(name: &str) -> Option<&str> {
    name.rsplit_once('-')
        .filter(|(_, d)| is_compact_date(d))
        .map(|(base, _)| base)
        .or_else(|| {
            // `name-YYYY-MM-DD`: the date holds two more dashes.
            let cut = name.len().checked_sub(11)?;
            let date = name.get(cut..)?.strip_prefix('-')?;
            is_dashed_date(date).then(|| &name[..cut])
        })
}

impl Price {
    fn is_sane(&self) -> bool {
        let ok = |r: &Rates| {
            [
                r.input,
                r.output,
                r.cache_read,
                r.cache_write_5m,
                r.cache_write_1h,
                r.reasoning,
            ]
            .iter()
            .all(|v| v.is_finite() && *v >= 0.0)
        };
        ok(&self.rates) && self.long_context.as_ref().is_none_or(|(_, r)| ok(r))
    }
}

/// `20250929`.
fn is_compact_date(s: &str) -> bool {
    s.len() == 8 && s.bytes().all(|b| b.is_ascii_digit())
}

/// `2025-04-14`.
fn is_dashed_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_list_parses_and_is_sane() {
        let mut prices = Prices::default();
        prices.merge(SHIPPED).unwrap();
        assert!(prices.models.len() >= 20);
        assert!(prices.models.values().all(Price::is_sane));
        assert_eq!(prices, Prices::shipped());
    }

    #[test]
    fn models_match_exactly_or_as_dated_snapshots_never_by_prefix() {
        let p = Prices::shipped();
        assert_eq!(p.price("openai", "gpt-4.1-mini").unwrap().rates.input, 0.4);
        assert_eq!(
            p.price("openai", "gpt-4.1-mini-2025-04-14").unwrap().rates.input,
            0.4
        );
        assert_eq!(p.price("openai", "gpt-4.1-2025-04-14").unwrap().rates.input, 2.0);
        assert_eq!(
            p.price("anthropic", "claude-sonnet-4-5-20250929")
                .unwrap()
                .rates
                .output,
            15.0
        );
        assert_eq!(p.price("anthropic", "claude-opus-4-5").unwrap().rates.input, 5.0);
        // A newer model does not borrow an older family's price.
        assert!(p.price("anthropic", "claude-opus-4-9").is_none());
        assert!(p.price("openai", "gpt-4.1-turbo").is_none());
        assert!(p.price("openai", "gpt-5-2025").is_none());
        assert!(p.price("openai", "llama3").is_none());
        assert!(p.price("anthropic", "gpt-4.1").is_none());
        // OpenAI's one cache-write rate fills both of Anthropic's.
        let sol = p.price("openai", "gpt-6-sol").unwrap();
        assert_eq!((sol.rates.cache_write_5m, sol.rates.cache_write_1h), (2.5, 2.5));
        let long = sol.long_context.unwrap();
        assert_eq!((long.0, long.1.input, long.1.cache_write_5m), (272_000, 4.0, 5.0));
    }

    #[test]
    fn a_bill_prices_every_kind_of_token() {
        let p = Prices::shipped();
        let sonnet = p.price("anthropic", "claude-sonnet-4-5").unwrap();
        let usage = Usage {
            input_tokens: 100_000,
            cached_input_tokens: 80_000,
            cache_write_tokens: 10_000,
            output_tokens: 2_000,
            reasoning_tokens: 500,
        };
        let bill = sonnet.bill(&usage, false);
        let want = (10_000.0 * 3.0 + 80_000.0 * 0.3 + 10_000.0 * 3.75 + 2_000.0 * 15.0) / 1e6;
        assert!((bill.cost_usd - want).abs() < 1e-12, "{bill:?}");
        assert!((bill.uncached_usd - (100_000.0 * 3.0 + 2_000.0 * 15.0) / 1e6).abs() < 1e-12);
        // A one-hour write is dearer.
        let hour = sonnet.bill(&usage, true);
        assert!((hour.cost_usd - bill.cost_usd - 10_000.0 * (6.0 - 3.75) / 1e6).abs() < 1e-12);
        // Above 200k input tokens every token bills at the long-context tier.
        let long = Usage {
            input_tokens: 250_000,
            output_tokens: 1_000,
            ..Usage::default()
        };
        let b = sonnet.bill(&long, false);
        assert!((b.cost_usd - (250_000.0 * 6.0 + 1_000.0 * 22.5) / 1e6).abs() < 1e-12);
        assert_eq!(b.saved_usd(), 0.0);
    }

    #[test]
    fn a_deployment_overrides_and_adds_and_bad_files_name_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(FILE),
            "openai:\n  gpt-4.1: {input: 1.0, output: 4.0}\n  local-llama: {input: 0, output: 0}\n",
        )
        .unwrap();
        let p = Prices::load(dir.path()).unwrap();
        assert_eq!(p.price("openai", "gpt-4.1").unwrap().rates.input, 1.0);
        assert_eq!(p.price("openai", "gpt-4.1").unwrap().rates.cache_read, 1.0);
        assert_eq!(p.price("openai", "local-llama").unwrap().rates.output, 0.0);
        assert_eq!(p.price("openai", "gpt-4o").unwrap().rates.input, 2.5);
        std::fs::write(
            dir.path().join(FILE),
            "openai:\n  gpt-4.1: {input: 1.0, output: 4.0, cache_raed: 0.1}\n",
        )
        .unwrap();
        let d = Prices::load(dir.path()).unwrap_err();
        assert_eq!((d.file.to_str(), d.line), (Some(FILE), 2), "{d}");
        std::fs::write(
            dir.path().join(FILE),
            "openai:\n  gpt-4.1: {input: -1.0, output: 4.0}\n",
        )
        .unwrap();
        assert!(
            Prices::load(dir.path())
                .unwrap_err()
                .message
                .contains("not negative")
        );
    }
}
