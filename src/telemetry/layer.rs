//! The tracing layer that turns steward's spans into [`SpanRecord`]s and hands each
//! closed, sampled one to the export queue.
//!
//! It does the least a span needs: ids from a thread-local generator, the sampling
//! decision once at the root (children follow their parent), fields written straight
//! into typed attributes, events inside a span kept as span events (an error-level one
//! fails the span). The general-purpose bridge (tracing-opentelemetry over the SDK's
//! tracer and processor) cost about 15% of a run's CPU per turn; this costs a few
//! hundred instructions per span (figures in docs/testing.md).
//!
//! [`with_record`] reaches a live span's record from a `tracing::Span`, for
//! `traceparent` and for continuing a trace received earlier.

use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::TraceSampler;
use super::queue::SpanSink;
use super::record::{EventRecord, Fields, SpanRecord, now_unix_nano, parse_traceparent};

/// Builds span records and sends the sampled ones to the export queue when they close.
pub struct ExportLayer {
    sink: SpanSink,
    sampler: TraceSampler,
}

impl ExportLayer {
    pub fn new(sink: SpanSink, sampler: TraceSampler) -> ExportLayer {
        ExportLayer { sink, sampler }
    }
}

impl TraceSampler {
    /// Whether a span is sampled, given its trace id and, when it has one, whether its
    /// parent is. Ratios use the trace id's low 64 bits, as the SDK samplers do, so
    /// every process samples the same traces.
    pub fn sampled(self, trace_id: u128, parent: Option<bool>) -> bool {
        let ratio = |r: f64| {
            let bound = (r.clamp(0.0, 1.0) * (1u64 << 63) as f64) as u64;
            r >= 1.0 || ((trace_id as u64) >> 1) < bound
        };
        match self {
            TraceSampler::AlwaysOn => true,
            TraceSampler::AlwaysOff => false,
            TraceSampler::Ratio(r) => ratio(r),
            TraceSampler::ParentBasedAlwaysOn => parent.unwrap_or(true),
            TraceSampler::ParentBasedAlwaysOff => parent.unwrap_or(false),
            TraceSampler::ParentBasedRatio(r) => parent.unwrap_or_else(|| ratio(r)),
        }
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
        // The nearest enclosing span this layer sees (filtered ones are skipped).
        let parent = span.parent().and_then(|p| {
            p.extensions()
                .get::<SpanRecord>()
                .map(|r| ((r.trace_id, r.span_id), r.sampled))
        });
        let mut record = SpanRecord::new(attrs.metadata().name(), parent.map(|p| p.0), false);
        record.sampled = self.sampler.sampled(record.trace_id, parent.map(|p| p.1));
        // A root's fields are kept even when it is not sampled yet: a trace continued
        // from a stored `traceparent` may sample it after creation.
        if record.sampled || parent.is_none() {
            // Room for every field the callsite declares, at once: growing the list as
            // fields arrive cost three reallocations and copies per span.
            record.attributes.reserve_exact(attrs.metadata().fields().len());
            Fields::first(&mut record, attrs);
        }
        span.extensions_mut().insert(record);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(record) = span.extensions_mut().get_mut::<SpanRecord>()
            && (record.sampled || record.parent_span_id == 0)
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
        let mut kept = EventRecord {
            time_unix_nano: now_unix_nano(),
            name: String::new(),
            attributes: Vec::new(),
            dropped_attributes: 0,
        };
        event.record(&mut Fields(&mut kept));
        if kept.name.is_empty() {
            kept.name = event.metadata().name().to_string();
        }
        if *event.metadata().level() == Level::ERROR && record.error.is_none() {
            record.error = Some(kept.name.clone());
        }
        record.add_event(kept);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(mut record) = span.extensions_mut().remove::<SpanRecord>() else {
            return;
        };
        if record.sampled {
            record.end_unix_nano = now_unix_nano();
            self.sink.send(record);
        }
    }
}

/// Runs `f` on the record of `span` (with the installed sampler), when the export layer
/// is installed and the span is one it records. The layer and the registry are found
/// through the dispatcher (`Layer`'s default `downcast_raw` answers for the layer).
pub fn with_record(span: &tracing::Span, f: impl FnOnce(TraceSampler, &mut SpanRecord)) {
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
            f(layer.sampler, record);
        }
    });
}

/// Makes the root span `span` a child of the remote span `traceparent` names, and samples
/// it as its parent was (parent-based samplers) or by its trace id. A malformed value,
/// or a span that is not a root, is left alone.
pub fn continue_trace(span: &tracing::Span, traceparent: &str) {
    let Some((trace_id, parent, parent_sampled)) = parse_traceparent(traceparent) else {
        return;
    };
    with_record(span, |sampler, record| {
        if record.parent_span_id != 0 {
            return;
        }
        record.trace_id = trace_id;
        record.parent_span_id = parent;
        record.parent_remote = true;
        record.sampled = sampler.sampled(trace_id, Some(parent_sampled));
    });
}

/// The W3C `traceparent` of `span`, when the export layer records it.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    let mut out = None;
    with_record(span, |_, record| out = Some(record.traceparent()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::queue::{Exporter, Transport};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::trace::v1::Span;
    use prost::Message as _;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use tracing_subscriber::layer::SubscriberExt;

    #[derive(Clone, Default)]
    struct Collect(Arc<Mutex<Vec<Span>>>);

    impl Transport for Collect {
        fn send(&mut self, body: Vec<u8>) -> Result<(), String> {
            let request = ExportTraceServiceRequest::decode(body.as_slice()).map_err(|e| e.to_string())?;
            let mut spans = self.0.lock().unwrap();
            for rs in request.resource_spans {
                for ss in rs.scope_spans {
                    spans.extend(ss.spans);
                }
            }
            Ok(())
        }
    }

    /// Runs `f` under a subscriber with only the export layer, then returns what was sent.
    fn exported(sampler: TraceSampler, f: impl FnOnce()) -> Vec<Span> {
        let collect = Collect::default();
        let (exporter, sink) = Exporter::start(collect.clone(), "test", None).unwrap();
        let subscriber = tracing_subscriber::registry().with(ExportLayer::new(sink, sampler));
        tracing::subscriber::with_default(subscriber, f);
        assert!(exporter.shutdown(Duration::from_secs(5)));
        collect.0.lock().unwrap().clone()
    }

    fn attr(span: &Span, key: &str) -> Option<String> {
        use opentelemetry_proto::tonic::common::v1::any_value::Value;
        span.attributes.iter().find(|kv| kv.key == key).map(|kv| {
            match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => s.clone(),
                Some(Value::IntValue(i)) => i.to_string(),
                Some(Value::BoolValue(b)) => b.to_string(),
                Some(Value::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            }
        })
    }

    #[test]
    fn nested_spans_share_a_trace_and_carry_their_fields_events_and_status() {
        let spans = exported(TraceSampler::AlwaysOn, || {
            let run = tracing::info_span!(
                "invoke_agent",
                otel.name = "invoke_agent helpdesk",
                "steward.turns" = tracing::field::Empty
            );
            let _in = run.enter();
            {
                let chat = tracing::info_span!(
                    "chat",
                    otel.kind = "client",
                    "gen_ai.usage.input_tokens" = 12u64,
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
        let (run, chat, eval) = (by("invoke_agent helpdesk"), by("chat"), by("evaluate_run"));
        assert!(run.parent_span_id.is_empty());
        assert_eq!(attr(run, "steward.turns").as_deref(), Some("2"));
        assert_eq!(
            run.attributes
                .iter()
                .filter(|kv| kv.key == "steward.turns")
                .count(),
            1
        );
        for child in [chat, eval] {
            assert_eq!(child.trace_id, run.trace_id);
            assert_eq!(child.parent_span_id, run.span_id);
        }
        assert_eq!(chat.kind, 3, "client");
        assert_eq!(attr(chat, "gen_ai.usage.input_tokens").as_deref(), Some("12"));
        assert_eq!(chat.status.as_ref().unwrap().code, 2);
        assert_eq!(chat.status.as_ref().unwrap().message, "timeout");
        assert_eq!(eval.events.len(), 2);
        assert_eq!(eval.events[0].name, "gen_ai.evaluation.result");
        assert_eq!(eval.events[0].attributes[0].key, "gen_ai.evaluation.score.value");
        assert_eq!(eval.status.as_ref().unwrap().message, "the judge failed");
        assert!(run.end_time_unix_nano >= run.start_time_unix_nano && run.start_time_unix_nano > 0);
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
        assert_eq!(run.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736u128.to_be_bytes());
        assert_eq!(run.parent_span_id, 0x00f067aa0ba902b7u64.to_be_bytes());
        assert_eq!(run.flags & 0x200, 0x200, "the parent is remote");
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
        let half = TraceSampler::Ratio(0.5);
        assert!(half.sampled(0, None));
        assert!(!half.sampled(u64::MAX as u128, None));
        let kept = (0..10_000u128)
            .filter(|_| half.sampled(fastrand::u128(..), None))
            .count();
        assert!((4_000..6_000).contains(&kept), "{kept}");
        assert!(TraceSampler::ParentBasedRatio(0.0).sampled(u64::MAX as u128, Some(true)));
        assert!(!TraceSampler::ParentBasedAlwaysOn.sampled(0, Some(false)));
    }
}
