//! The tracing layer that turns steward's spans into [`SpanRecord`]s and hands each
//! closed, sampled one to the SDK's batch processor ([`super::export::Export`]).
//!
//! It does the least a span needs: ids from the SDK's generator, the SDK sampler's
//! decision once at the root (children follow their parent, as the parent-based
//! samplers decide and as ratio samplers do for one trace id), fields written straight
//! into typed attributes, events inside a span kept as span events (an error-level one
//! fails the span). The general-purpose bridge (tracing-opentelemetry over the SDK's
//! tracer) made a second span object per span and cost 15–17% of a turn's instructions;
//! with this layer the exporter's conversion and encoding are most of what export costs
//! (figures in docs/testing.md).
//!
//! [`with_record`] reaches a live span's record from a `tracing::Span`, for
//! `traceparent` and for continuing a trace received earlier.

use std::sync::Arc;

use opentelemetry::trace::{SpanContext, SpanId, SpanKind, TraceContextExt as _};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, Sampler, SamplingDecision, ShouldSample};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::export::Export;
use super::propagation;
use super::record::{Fields, SpanRecord};

/// Builds span records and sends the sampled ones to the batch processor when they close.
pub struct ExportLayer {
    export: Arc<Export>,
    sampler: Sampler,
    ids: RandomIdGenerator,
    scope: InstrumentationScope,
}

impl ExportLayer {
    pub fn new(export: Arc<Export>, sampler: Sampler) -> ExportLayer {
        ExportLayer {
            export,
            sampler,
            ids: RandomIdGenerator::default(),
            scope: InstrumentationScope::builder("steward")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        }
    }

    /// The sampler's decision for a root span of `trace_id`, under `remote` when it
    /// continues another process's span.
    fn sample(
        &self,
        trace_id: opentelemetry::trace::TraceId,
        name: &str,
        remote: Option<&SpanContext>,
    ) -> bool {
        let parent = remote.map(|sc| opentelemetry::Context::new().with_remote_span_context(sc.clone()));
        let no_attributes: &[KeyValue] = &[];
        let result = self.sampler.should_sample(
            parent.as_ref(),
            trace_id,
            name,
            &SpanKind::Internal,
            no_attributes,
            &[],
        );
        result.decision == SamplingDecision::RecordAndSample
    }
}

impl<S> tracing_subscriber::Layer<S> for ExportLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let name = attrs.metadata().name();
        // The nearest enclosing span this layer sees (filtered ones are skipped).
        let parent = span.parent().and_then(|p| {
            p.extensions()
                .get::<SpanRecord>()
                .map(|r| (r.trace_id, r.span_id, r.sampled))
        });
        let mut record = match parent {
            Some((trace_id, parent_id, sampled)) => {
                let mut r = SpanRecord::new(name, trace_id, self.ids.new_span_id(), Some(parent_id));
                r.sampled = sampled;
                r
            }
            None => {
                let trace_id = self.ids.new_trace_id();
                let mut r = SpanRecord::new(name, trace_id, self.ids.new_span_id(), None);
                r.sampled = self.sample(trace_id, name, None);
                r
            }
        };
        // A root's fields are kept even when it is not sampled yet: a trace continued
        // from a stored `traceparent` may sample it after creation.
        if record.sampled || parent.is_none() {
            Fields::first(&mut record, attrs);
        }
        span.extensions_mut().insert(record);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(record) = span.extensions_mut().get_mut::<SpanRecord>()
            && (record.sampled || record.is_root())
        {
            values.record(&mut Fields(record));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let mut extensions = span.extensions_mut();
        let Some(record) = extensions.get_mut::<SpanRecord>().filter(|r| r.sampled) else {
            return;
        };
        let mut kept = opentelemetry::trace::Event::with_name(event.metadata().name());
        event.record(&mut Fields(&mut kept));
        if *event.metadata().level() == Level::ERROR && record.error.is_none() {
            record.error = Some(kept.name.to_string());
        }
        record.add_event(kept);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(record) = span.extensions_mut().remove::<SpanRecord>() else {
            return;
        };
        if record.sampled {
            self.export.end(record.finish(&self.scope));
        }
    }
}

/// Runs `f` on the record of `span` (with the installed layer), when the export layer
/// is installed and the span is one it records. The layer and the registry are found
/// through the dispatcher (`Layer`'s default `downcast_raw` answers for the layer).
fn with_record(span: &tracing::Span, f: impl FnOnce(&ExportLayer, &mut SpanRecord)) {
    span.with_subscriber(|(id, dispatch)| {
        let (Some(layer), Some(registry)) = (
            dispatch.downcast_ref::<ExportLayer>(),
            dispatch.downcast_ref::<Registry>(),
        ) else {
            return;
        };
        if let Some(span) = registry.span(id)
            && let Some(record) = span.extensions_mut().get_mut::<SpanRecord>()
        {
            f(layer, record);
        }
    });
}

/// Makes the root span `span` a child of the remote span `remote`, and samples it as the
/// installed sampler decides for that parent (the parent-based samplers follow it). A
/// span that is not a local root, or already continues one, is left alone.
pub fn continue_remote(span: &tracing::Span, remote: &SpanContext) {
    if !remote.is_valid() {
        return;
    }
    with_record(span, |layer, record| {
        if record.parent_span_id != SpanId::INVALID {
            return;
        }
        record.trace_id = remote.trace_id();
        record.parent_span_id = remote.span_id();
        record.parent_remote = true;
        record.trace_state = remote.trace_state().clone();
        record.sampled = layer.sample(remote.trace_id(), &record.name, Some(remote));
    });
}

/// [`continue_remote`] from a stored W3C `traceparent`; a malformed value is ignored.
pub fn continue_trace(span: &tracing::Span, traceparent: &str) {
    if let Some(remote) = propagation::extract(traceparent, None) {
        continue_remote(span, &remote);
    }
}

/// The W3C context of `span`, when the export layer records it.
pub fn span_context(span: &tracing::Span) -> Option<SpanContext> {
    let mut out = None;
    with_record(span, |_, record| out = Some(record.context()));
    out
}

/// The W3C `traceparent` of `span`, when the export layer records it.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    span_context(span).map(|sc| propagation::traceparent(&sc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::TraceSampler;
    use crate::telemetry::export::testing::Collect;
    use opentelemetry::Value;
    use opentelemetry::trace::{Status, TraceId};
    use opentelemetry_sdk::trace::SpanData;
    use std::time::Duration;
    use tracing_subscriber::layer::SubscriberExt;

    /// Runs `f` under a subscriber with only the export layer, then returns what the SDK's
    /// batch processor exported.
    fn exported(sampler: TraceSampler, f: impl FnOnce()) -> Vec<SpanData> {
        let collect = Collect::default();
        let export = Arc::new(Export::start(
            collect.clone(),
            &opentelemetry_sdk::Resource::builder_empty().build(),
            1024,
            None,
        ));
        let subscriber = tracing_subscriber::registry().with(ExportLayer::new(export.clone(), sampler.sdk()));
        tracing::subscriber::with_default(subscriber, f);
        assert!(export.shutdown(Duration::from_secs(5)));
        collect.0.lock().unwrap().clone()
    }

    fn attr(span: &SpanData, key: &str) -> Option<String> {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    }

    #[test]
    fn nested_spans_share_a_trace_and_carry_their_fields_events_and_status() {
        let spans = exported(TraceSampler::AlwaysOn, || {
            let run = tracing::info_span!(
                "invoke_agent",
                "gen_ai.agent.name" = "helpdesk",
                "steward.turns" = tracing::field::Empty
            );
            let _in = run.enter();
            {
                let chat = tracing::info_span!(
                    "chat",
                    otel.kind = "client",
                    "gen_ai.request.model" = "gpt-4.1",
                    "gen_ai.usage.input_tokens" = 12u64,
                    "gen_ai.response.finish_reasons" = "stop,length",
                    "error.type" = tracing::field::Empty
                );
                chat.record("error.type", "timeout");
            }
            {
                let eval = tracing::info_span!("evaluate_run");
                let _e = eval.enter();
                tracing::info!("gen_ai.evaluation.score.value" = 0.5, "gen_ai.evaluation.result");
                tracing::error!("the judge failed");
            }
            // Recorded twice: the later value replaces the earlier one.
            run.record("steward.turns", 1);
            run.record("steward.turns", 2);
        });
        let by = |name: &str| {
            spans
                .iter()
                .find(|s| s.name == name)
                .unwrap_or_else(|| panic!("{name} in {spans:?}"))
        };
        let (run, chat, eval) = (
            by("invoke_agent helpdesk"),
            by("chat gpt-4.1"),
            by("evaluate_run"),
        );
        assert_eq!(run.parent_span_id, SpanId::INVALID);
        assert_eq!(attr(run, "steward.turns").as_deref(), Some("2"));
        assert_eq!(
            run.attributes
                .iter()
                .filter(|kv| kv.key.as_str() == "steward.turns")
                .count(),
            1
        );
        for child in [chat, eval] {
            assert_eq!(child.span_context.trace_id(), run.span_context.trace_id());
            assert_eq!(child.parent_span_id, run.span_context.span_id());
        }
        assert_eq!(chat.span_kind, SpanKind::Client);
        assert_eq!(attr(chat, "gen_ai.usage.input_tokens").as_deref(), Some("12"));
        let reasons = chat
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == "gen_ai.response.finish_reasons")
            .map(|kv| kv.value.clone());
        assert_eq!(
            reasons,
            Some(Value::Array(opentelemetry::Array::String(vec![
                "stop".into(),
                "length".into()
            ])))
        );
        assert_eq!(chat.status, Status::error("timeout"));
        assert_eq!(eval.events.len(), 2);
        assert_eq!(eval.events[0].name, "gen_ai.evaluation.result");
        assert_eq!(
            eval.events[0].attributes[0].key.as_str(),
            "gen_ai.evaluation.score.value"
        );
        assert_eq!(eval.status, Status::error("the judge failed"));
        assert!(run.end_time >= run.start_time);
        assert_eq!(run.instrumentation_scope.name(), "steward");
    }

    #[test]
    fn a_continued_trace_follows_its_remote_parent_and_sampling() {
        let remote = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let mut seen = None;
        let spans = exported(TraceSampler::ParentBasedAlwaysOff, || {
            // A local root is not sampled under parent-based always-off ...
            drop(tracing::info_span!("ingest"));
            // ... a root continuing a sampled remote parent is, with its children.
            let run = tracing::info_span!("invoke_agent", "gen_ai.agent.name" = "helpdesk");
            continue_trace(&run, remote);
            seen = traceparent(&run);
            let _in = run.enter();
            drop(tracing::info_span!("chat"));
        });
        assert_eq!(spans.len(), 2, "{spans:?}");
        let run = spans.iter().find(|s| s.name == "invoke_agent helpdesk").unwrap();
        assert_eq!(
            run.span_context.trace_id(),
            TraceId::from(0x4bf92f3577b34da6a3ce929d0e0e4736u128)
        );
        assert_eq!(run.parent_span_id, SpanId::from(0x00f067aa0ba902b7u64));
        assert!(run.parent_span_is_remote);
        assert_eq!(attr(run, "gen_ai.agent.name").as_deref(), Some("helpdesk"));
        let seen = seen.unwrap();
        assert!(
            seen.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-") && seen.ends_with("-01"),
            "{seen}"
        );
    }

    #[test]
    fn always_off_exports_nothing_and_ratios_are_decided_by_trace_id() {
        let spans = exported(TraceSampler::AlwaysOff, || {
            drop(tracing::info_span!("invoke_agent"))
        });
        assert!(spans.is_empty());
        // Without the layer there is no traceparent at all.
        assert_eq!(traceparent(&tracing::info_span!("x")), None);
        // The SDK's ratio sampler keeps about its share of root traces.
        let spans = exported(TraceSampler::Ratio(0.5), || {
            for _ in 0..400 {
                drop(tracing::info_span!("invoke_agent"));
            }
        });
        assert!((120..280).contains(&spans.len()), "{}", spans.len());
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_blocking() {
        /// An exporter held shut until the test opens it: the processor's queue cannot
        /// drain while spans arrive.
        #[derive(Debug)]
        struct Gate(std::sync::Mutex<std::sync::mpsc::Receiver<()>>);
        impl opentelemetry_sdk::trace::SpanExporter for Gate {
            async fn export(&self, _: Vec<SpanData>) -> opentelemetry_sdk::error::OTelSdkResult {
                let _ = self.0.lock().unwrap().recv_timeout(Duration::from_secs(10));
                Ok(())
            }
        }
        let (open, gate) = std::sync::mpsc::channel();
        let dropped = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = dropped.clone();
        let export = Export::start(
            Gate(std::sync::Mutex::new(gate)),
            &opentelemetry_sdk::Resource::builder_empty().build(),
            4,
            Some(Arc::new(move |n| {
                counted.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            })),
        );
        let export = Arc::new(export);
        let subscriber =
            tracing_subscriber::registry().with(ExportLayer::new(export.clone(), Sampler::AlwaysOn));
        tracing::subscriber::with_default(subscriber, || {
            for _ in 0..20 {
                drop(tracing::info_span!("s"));
            }
        });
        // At most one batch (4) is in the held export and 4 wait in the queue: the
        // rest were refused and counted, and nothing blocked.
        let n = dropped.load(std::sync::atomic::Ordering::Relaxed);
        assert!((12..=16).contains(&n), "{n} dropped");
        for _ in 0..4 {
            let _ = open.send(());
        }
        assert!(export.shutdown(Duration::from_secs(5)));
    }
}
