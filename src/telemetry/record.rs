//! One span as steward builds it from tracing's callbacks, in the OpenTelemetry SDK's
//! own types: ids, name, kind, times, typed attributes ([`KeyValue`] with keys borrowed
//! from the callsite), events and an error status. When the span closes it becomes the
//! SDK's [`SpanData`] by moves alone ([`SpanRecord::finish`]), for the batch processor.
//!
//! Building the record here rather than through the SDK's `Tracer` and `Span` is what
//! keeps export cheap: tracing already holds each span, so a second span object, its
//! lock and its context per span are saved (figures in docs/testing.md).

use std::borrow::Cow;
use std::fmt;
use std::time::SystemTime;

use opentelemetry::trace::{Event, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{InstrumentationScope, Key, KeyValue, Value};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use tracing::field::{Field, Visit};

/// Attributes kept per span or event, at most (the SDK's default span limit); more are
/// counted as dropped.
pub const MAX_ATTRIBUTES: usize = 128;
/// Events kept per span, at most.
pub const MAX_EVENTS: usize = 128;

/// A span being built, then exported when it closes.
#[derive(Debug, Clone)]
pub struct SpanRecord {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    /// [`SpanId::INVALID`] for a root span.
    pub parent_span_id: SpanId,
    /// The parent came from another process (a stored or received `traceparent`).
    pub parent_remote: bool,
    /// The remote parent's `tracestate`, carried on unchanged.
    pub trace_state: TraceState,
    pub sampled: bool,
    pub name: Cow<'static, str>,
    pub kind: SpanKind,
    pub start: SystemTime,
    pub attributes: Vec<KeyValue>,
    pub dropped_attributes: u32,
    pub events: Vec<Event>,
    pub dropped_events: u32,
    /// `Some` when the span failed: the status message (`error.type`, or the message of
    /// an error-level event inside it).
    pub error: Option<String>,
    /// Bit `i` set: the callsite's field `i` (below 64) has a value among the
    /// attributes, so a new value replaces it; unset, it is appended without a search.
    seen: u64,
}

impl SpanRecord {
    /// A span with the ids given; `parent` is the local parent's span id, when it has one.
    pub fn new(name: &'static str, trace_id: TraceId, span_id: SpanId, parent: Option<SpanId>) -> SpanRecord {
        SpanRecord {
            trace_id,
            span_id,
            parent_span_id: parent.unwrap_or(SpanId::INVALID),
            parent_remote: false,
            trace_state: TraceState::NONE,
            sampled: false,
            name: Cow::Borrowed(name),
            kind: SpanKind::Internal,
            start: SystemTime::now(),
            attributes: Vec::new(),
            dropped_attributes: 0,
            events: Vec::new(),
            dropped_events: 0,
            error: None,
            seen: 0,
        }
    }

    /// Whether the span is a root in this process (no local parent).
    pub fn is_root(&self) -> bool {
        self.parent_span_id == SpanId::INVALID || self.parent_remote
    }

    /// The W3C flags: sampled or not.
    fn flags(&self) -> TraceFlags {
        if self.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        }
    }

    /// The span's W3C context (what `traceparent` carries).
    pub fn context(&self) -> SpanContext {
        SpanContext::new(
            self.trace_id,
            self.span_id,
            self.flags(),
            false,
            self.trace_state.clone(),
        )
    }

    /// Sets (or replaces) one attribute. The `otel.*` keys steer the span itself
    /// (`otel.name`, `otel.kind`); `error.type` also marks the span failed.
    pub fn set(&mut self, key: &'static str, value: Value) {
        self.set_field(None, key, value);
    }

    /// [`SpanRecord::set`] for the callsite's field number `index`, which spares the
    /// search for an earlier value when the field has none.
    fn set_field(&mut self, index: Option<usize>, key: &'static str, value: Value) {
        match (key, value) {
            ("otel.name", Value::String(name)) => self.name = Cow::Owned(name.to_string()),
            ("otel.kind", Value::String(kind)) => self.kind = kind_of(kind.as_str()),
            (key, value) => {
                if key == "error.type"
                    && let Value::String(kind) = &value
                {
                    self.error = Some(kind.as_str().to_string());
                }
                let bit = index.filter(|i| *i < 64).map(|i| 1u64 << i);
                match bit {
                    Some(bit) if self.seen & bit == 0 && self.attributes.len() < MAX_ATTRIBUTES => {
                        self.seen |= bit;
                        self.attributes
                            .push(KeyValue::new(Key::from_static_str(key), value));
                    }
                    _ => put(&mut self.attributes, &mut self.dropped_attributes, key, value),
                }
            }
        }
    }

    /// Adds an event, or counts it as dropped past [`MAX_EVENTS`].
    pub fn add_event(&mut self, event: Event) {
        if self.events.len() < MAX_EVENTS {
            self.events.push(event);
        } else {
            self.dropped_events += 1;
        }
    }

    /// The closed span as the SDK exports it. Only moves: names and typed arrays are
    /// finished on the export thread ([`super::export`]).
    pub fn finish(self, scope: &InstrumentationScope) -> SpanData {
        let flags = self.flags();
        // Built field by field: the SDK marks the struct non-exhaustive.
        let mut events = SpanEvents::default();
        events.events = self.events;
        events.dropped_count = self.dropped_events;
        let status = match self.error {
            Some(message) => Status::error(message),
            None => Status::Unset,
        };
        SpanData {
            span_context: SpanContext::new(self.trace_id, self.span_id, flags, false, self.trace_state),
            parent_span_id: self.parent_span_id,
            parent_span_is_remote: self.parent_remote,
            span_kind: self.kind,
            name: self.name,
            start_time: self.start,
            end_time: SystemTime::now(),
            attributes: self.attributes,
            dropped_attributes_count: self.dropped_attributes,
            events,
            links: SpanLinks::default(),
            status,
            instrumentation_scope: scope.clone(),
        }
    }
}

fn kind_of(text: &str) -> SpanKind {
    match text {
        "server" => SpanKind::Server,
        "client" => SpanKind::Client,
        "producer" => SpanKind::Producer,
        "consumer" => SpanKind::Consumer,
        _ => SpanKind::Internal,
    }
}

/// Sets or replaces `key` in `attributes`, counting what does not fit.
fn put(attributes: &mut Vec<KeyValue>, dropped: &mut u32, key: &'static str, value: Value) {
    if let Some(slot) = attributes.iter_mut().find(|kv| kv.key.as_str() == key) {
        slot.value = value;
    } else if attributes.len() < MAX_ATTRIBUTES {
        attributes.push(KeyValue::new(Key::from_static_str(key), value));
    } else {
        *dropped += 1;
    }
}

/// Takes typed field values: a span's attributes, or an event's.
pub trait Put {
    fn put(&mut self, field: &Field, value: Value);
}

impl Put for SpanRecord {
    fn put(&mut self, field: &Field, value: Value) {
        self.set_field(Some(field.index()), field.name(), value);
    }
}

impl Put for Event {
    /// `message` names the event; the other fields are its attributes.
    fn put(&mut self, field: &Field, value: Value) {
        match (field.name(), value) {
            ("message", Value::String(text)) => self.name = Cow::Owned(text.to_string()),
            (key, value) => put(
                &mut self.attributes,
                &mut self.dropped_attributes_count,
                key,
                value,
            ),
        }
    }
}

/// Writes the fields tracing hands over, typed, into a span or an event.
pub struct Fields<'a, T: Put>(pub &'a mut T);

impl Fields<'_, SpanRecord> {
    /// The fields a span was created with.
    pub fn first(record: &mut SpanRecord, attrs: &tracing::span::Attributes<'_>) {
        // Room for every field the callsite declares, at once: growing the list as
        // fields arrive cost three reallocations and copies per span.
        record.attributes.reserve_exact(attrs.metadata().fields().len());
        attrs.record(&mut Fields(record));
    }
}

impl<T: Put> Visit for Fields<'_, T> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.put(field, Value::String(value.to_string().into()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.put(field, Value::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.put(field, unsigned(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.put(field, Value::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.put(field, Value::Bool(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.put(field, Value::String(value.to_string().into()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.put(field, Value::String(format!("{value:?}").into()));
    }
}

/// OTLP integers are signed; a `u64` past `i64::MAX` goes as text rather than wrap.
fn unsigned(value: u64) -> Value {
    i64::try_from(value).map_or_else(|_| Value::String(value.to_string().into()), Value::I64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &'static str) -> SpanRecord {
        SpanRecord::new(name, TraceId::from(7u128), SpanId::from(9u64), None)
    }

    #[test]
    fn otel_keys_steer_the_span_and_error_type_fails_it() {
        let mut span = record("chat");
        span.set("otel.name", Value::String("chat gpt-4.1".into()));
        span.set("otel.kind", Value::String("client".into()));
        span.set("gen_ai.usage.input_tokens", Value::I64(1));
        span.set("gen_ai.usage.input_tokens", Value::I64(2));
        span.set("error.type", Value::String("rate_limited".into()));
        assert_eq!(span.name, "chat gpt-4.1");
        assert_eq!(span.kind, SpanKind::Client);
        assert_eq!(
            span.attributes,
            vec![
                KeyValue::new("gen_ai.usage.input_tokens", 2),
                KeyValue::new("error.type", "rate_limited")
            ]
        );
        let data = span.finish(&InstrumentationScope::builder("t").build());
        assert_eq!(data.status, Status::error("rate_limited"));
        assert!(data.end_time >= data.start_time);
        assert_eq!(unsigned(u64::MAX), Value::String(u64::MAX.to_string().into()));
    }

    #[test]
    fn attributes_and_events_past_the_caps_are_counted() {
        let mut span = record("s");
        let keys: Vec<&'static str> = (0..MAX_ATTRIBUTES + 3)
            .map(|i| &*Box::leak(format!("k{i}").into_boxed_str()))
            .collect();
        for k in keys {
            span.set(k, Value::Bool(true));
        }
        assert_eq!(span.attributes.len(), MAX_ATTRIBUTES);
        assert_eq!(span.dropped_attributes, 3);
        for _ in 0..MAX_EVENTS + 2 {
            span.add_event(Event::with_name("e"));
        }
        assert_eq!(span.events.len(), MAX_EVENTS);
        assert_eq!(span.dropped_events, 2);
    }
}
