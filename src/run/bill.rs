//! A run's token bill: each model call of the run (turns and compaction summaries)
//! with its input, cache reads and writes, output, reasoning, cost and what the
//! prompt cache saved, and the totals. Read back from the run's events, so it is the
//! same for a live run, a finished one and one from before an upgrade.

use serde::Serialize;

use crate::store::StoredEvent;
use crate::types::Usage;

/// One model call's tokens and cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallBill {
    /// `turn` or `compaction`.
    pub kind: &'static str,
    /// The turn, or the compaction's number.
    pub n: u64,
    pub model: String,
    pub input_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
    /// `None`: the model has no price.
    pub cost_usd: Option<f64>,
    pub cache_saved_usd: Option<f64>,
}

/// The bill of a run's own model calls (a subagent's calls are on its own run).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TokenBill {
    pub calls: Vec<CallBill>,
    pub input_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
    /// `None` when any call's model has no price.
    pub cost_usd: Option<f64>,
    pub cache_saved_usd: f64,
    /// Share of input tokens read from the prompt cache.
    pub cache_hit: f64,
}

impl TokenBill {
    /// The bill from a run's events, in the order the calls were made.
    pub fn from_events(events: &[StoredEvent]) -> TokenBill {
        let mut bill = TokenBill {
            cost_usd: Some(0.0),
            ..TokenBill::default()
        };
        for e in events {
            let (kind, n) = match e.kind.as_str() {
                "model_response" => ("turn", e.data["turn"].as_u64().unwrap_or(0)),
                "compaction" => ("compaction", e.data["n"].as_u64().unwrap_or(0)),
                _ => continue,
            };
            let usage: Usage = serde_json::from_value(e.data["usage"].clone()).unwrap_or_default();
            let call = CallBill {
                kind,
                n,
                model: e.data["model"].as_str().unwrap_or_default().to_string(),
                input_tokens: usage.input_tokens,
                cache_read_tokens: usage.cached_input_tokens,
                cache_write_tokens: usage.cache_write_tokens,
                output_tokens: usage.output_tokens,
                reasoning_tokens: usage.reasoning_tokens,
                cost_usd: e.data["cost_usd"].as_f64(),
                cache_saved_usd: e.data["cache_saved_usd"].as_f64(),
            };
            bill.add(call);
        }
        bill.cache_hit = ratio(bill.cache_read_tokens, bill.input_tokens);
        bill
    }

    fn add(&mut self, call: CallBill) {
        self.input_tokens += call.input_tokens;
        self.cache_read_tokens += call.cache_read_tokens;
        self.cache_write_tokens += call.cache_write_tokens;
        self.output_tokens += call.output_tokens;
        self.reasoning_tokens += call.reasoning_tokens;
        self.cost_usd = self.cost_usd.zip(call.cost_usd).map(|(a, b)| a + b);
        self.cache_saved_usd += call.cache_saved_usd.unwrap_or(0.0);
        self.calls.push(call);
    }

    /// The bill as a table for `steward runs show`.
    pub fn render(&self) -> String {
        let money = |c: Option<f64>| c.map_or_else(|| "unknown".to_string(), |c| format!("${c:.4}"));
        let mut out = format!(
            "  {:<12} {:<32} {:>9} {:>9} {:>9} {:>8} {:>9} {:>10} {:>9}\n",
            "call", "model", "input", "cached", "written", "output", "reasoning", "cost", "saved"
        );
        for c in &self.calls {
            out.push_str(&format!(
                "  {:<12} {:<32} {:>9} {:>9} {:>9} {:>8} {:>9} {:>10} {:>9}\n",
                format!("{} {}", c.kind, c.n),
                c.model,
                c.input_tokens,
                c.cache_read_tokens,
                c.cache_write_tokens,
                c.output_tokens,
                c.reasoning_tokens,
                money(c.cost_usd),
                money(c.cache_saved_usd),
            ));
        }
        out.push_str(&format!(
            "  {:<12} {:<32} {:>9} {:>9} {:>9} {:>8} {:>9} {:>10} {:>9}\n  {:.0}% of input read from the prompt cache\n",
            "total",
            "",
            self.input_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
            self.output_tokens,
            self.reasoning_tokens,
            money(self.cost_usd),
            money(Some(self.cache_saved_usd)),
            self.cache_hit * 100.0
        ));
        out
    }
}

/// `part / whole`, 0 when there is no whole.
pub fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: &str, data: serde_json::Value) -> StoredEvent {
        StoredEvent {
            seq: 0,
            run_id: "r".into(),
            at: chrono::Utc::now(),
            kind: kind.into(),
            data,
        }
    }

    #[test]
    fn adds_up_the_calls_and_an_unpriced_one_makes_the_cost_unknown() {
        let usage = |input: u64, cached: u64| {
            json!({"input_tokens": input, "output_tokens": 10, "cached_input_tokens": cached,
                   "cache_write_tokens": 0, "reasoning_tokens": 0})
        };
        let mut events = vec![
            event(
                "model_response",
                json!({"turn": 1, "model": "anthropic/claude-sonnet-4-5", "usage": usage(1000, 0), "cost_usd": 0.003}),
            ),
            event("tool_call", json!({})),
            event(
                "model_response",
                json!({"turn": 2, "model": "anthropic/claude-sonnet-4-5", "usage": usage(2000, 1000),
                  "cost_usd": 0.0035, "cache_saved_usd": 0.0027}),
            ),
            event(
                "compaction",
                json!({"n": 1, "model": "anthropic/claude-sonnet-4-5", "usage": usage(1000, 900), "cost_usd": 0.001}),
            ),
        ];
        let bill = TokenBill::from_events(&events);
        assert_eq!(bill.calls.len(), 3);
        assert_eq!(bill.calls[2].kind, "compaction");
        assert_eq!((bill.input_tokens, bill.cache_read_tokens), (4000, 1900));
        assert!((bill.cost_usd.unwrap() - 0.0075).abs() < 1e-12);
        assert!((bill.cache_hit - 0.475).abs() < 1e-12);
        assert!(bill.render().contains("48% of input read from the prompt cache"));
        events.push(event(
            "model_response",
            json!({"turn": 3, "model": "openai/llama3", "usage": usage(10, 0), "cost_usd": null}),
        ));
        let bill = TokenBill::from_events(&events);
        assert_eq!(bill.cost_usd, None);
        assert!(bill.render().contains("unknown"));
    }
}
