//! One span as steward exports it: ids, name, kind, times, typed attributes, events and
//! an error status. Built by the tracing layer ([`super::layer`]) straight from tracing's
//! field callbacks, with attribute keys borrowed from the callsite (`&'static str`), so a
//! span costs a few small allocations and nothing is converted twice.

use std::borrow::Cow;
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};

/// Attributes kept per span or event, at most; more are counted as dropped.
pub const MAX_ATTRIBUTES: usize = 128;
/// Events kept per span, at most.
pub const MAX_EVENTS: usize = 128;

/// An attribute value, typed as OTLP carries it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(Text),
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// Bytes of text kept inside a [`Text`] rather than on the heap.
const INLINE: usize = 30;

/// A string attribute value: up to 30 bytes inline (operation and provider names, model
/// names, finish reasons, tool call ids), longer ones on the heap. A span's string
/// values were an allocation and a free each, a fifth of what exporting a span cost.
#[derive(Clone, PartialEq)]
pub enum Text {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(String),
}

impl Text {
    pub fn as_str(&self) -> &str {
        match self {
            // Filled from a `&str` whole, so always UTF-8; the fallback is unreachable.
            Text::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            Text::Heap(s) => s,
        }
    }

    pub fn into_string(self) -> String {
        match self {
            Text::Heap(s) => s,
            inline => inline.as_str().to_string(),
        }
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        if s.len() <= INLINE {
            let mut bytes = [0u8; INLINE];
            bytes[..s.len()].copy_from_slice(s.as_bytes());
            Text::Inline {
                len: s.len() as u8,
                bytes,
            }
        } else {
            Text::Heap(s.to_string())
        }
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        if s.len() <= INLINE {
            Text::from(s.as_str())
        } else {
            Text::Heap(s)
        }
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// The OTLP span kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    #[default]
    Internal,
    Server,
    Client,
    Producer,
    Consumer,
}

impl Kind {
    fn parse(text: &str) -> Option<Kind> {
        Some(match text {
            "internal" => Kind::Internal,
            "server" => Kind::Server,
            "client" => Kind::Client,
            "producer" => Kind::Producer,
            "consumer" => Kind::Consumer,
            _ => return None,
        })
    }
}

/// Something that happened during a span (a tracing event inside it).
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub time_unix_nano: u64,
    pub name: String,
    pub attributes: Vec<(&'static str, Value)>,
    pub dropped_attributes: u32,
}

/// A span being built, then exported when it closes.
#[derive(Debug, Clone)]
pub struct SpanRecord {
    pub trace_id: u128,
    pub span_id: u64,
    /// 0 for a root span.
    pub parent_span_id: u64,
    /// The parent came from another process (a stored `traceparent`).
    pub parent_remote: bool,
    pub sampled: bool,
    pub name: Cow<'static, str>,
    pub kind: Kind,
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
    pub attributes: Vec<(&'static str, Value)>,
    pub dropped_attributes: u32,
    pub events: Vec<EventRecord>,
    pub dropped_events: u32,
    /// `Some` when the span failed: the status message (`error.type`, or the message of
    /// an error-level event inside it).
    pub error: Option<String>,
    /// Bit `i` set: the callsite's field `i` (below 64) has a value among the
    /// attributes, so a new value replaces it; unset, it is appended without a search.
    seen: u64,
}

/// Now, in nanoseconds since the Unix epoch.
pub fn now_unix_nano() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl SpanRecord {
    /// A span with fresh ids; `parent` is the local parent's `(trace id, span id)`.
    pub fn new(name: &'static str, parent: Option<(u128, u64)>, sampled: bool) -> SpanRecord {
        let (trace_id, parent_span_id) = parent.unwrap_or_else(|| (fastrand::u128(1..), 0));
        SpanRecord {
            trace_id,
            span_id: fastrand::u64(1..),
            parent_span_id,
            parent_remote: false,
            sampled,
            name: Cow::Borrowed(name),
            kind: Kind::Internal,
            start_unix_nano: now_unix_nano(),
            end_unix_nano: 0,
            attributes: Vec::new(),
            dropped_attributes: 0,
            events: Vec::new(),
            dropped_events: 0,
            error: None,
            seen: 0,
        }
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
            ("otel.name", Value::Str(name)) => self.name = Cow::Owned(name.into_string()),
            ("otel.kind", Value::Str(kind)) => self.kind = Kind::parse(kind.as_str()).unwrap_or_default(),
            (key, value) => {
                if key == "error.type"
                    && let Value::Str(kind) = &value
                {
                    self.error = Some(kind.as_str().to_string());
                }
                let bit = index.filter(|i| *i < 64).map(|i| 1u64 << i);
                match bit {
                    Some(bit) if self.seen & bit == 0 && self.attributes.len() < MAX_ATTRIBUTES => {
                        self.seen |= bit;
                        self.attributes.push((key, value));
                    }
                    _ => put(&mut self.attributes, &mut self.dropped_attributes, key, value),
                }
            }
        }
    }

    /// Adds an event, or counts it as dropped past [`MAX_EVENTS`].
    pub fn add_event(&mut self, event: EventRecord) {
        if self.events.len() < MAX_EVENTS {
            self.events.push(event);
        } else {
            self.dropped_events += 1;
        }
    }

    /// The W3C `traceparent` of this span.
    pub fn traceparent(&self) -> String {
        format!(
            "00-{:032x}-{:016x}-{:02x}",
            self.trace_id,
            self.span_id,
            u8::from(self.sampled)
        )
    }
}

/// Sets or replaces `key` in `attributes`, counting what does not fit.
fn put(attributes: &mut Vec<(&'static str, Value)>, dropped: &mut u32, key: &'static str, value: Value) {
    if let Some(slot) = attributes.iter_mut().find(|(k, _)| *k == key) {
        slot.1 = value;
    } else if attributes.len() < MAX_ATTRIBUTES {
        attributes.push((key, value));
    } else {
        *dropped += 1;
    }
}

/// A parsed W3C `traceparent`: trace id, parent span id, sampled.
pub fn parse_traceparent(text: &str) -> Option<(u128, u64, bool)> {
    let mut parts = text.trim().split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version != "00" || parts.next().is_some() || trace.len() != 32 || span.len() != 16 || flags.len() != 2
    {
        return None;
    }
    let trace = u128::from_str_radix(trace, 16).ok()?;
    let span = u64::from_str_radix(span, 16).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    (trace != 0 && span != 0).then_some((trace, span, flags & 1 == 1))
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

impl Put for EventRecord {
    /// `message` names the event; the other fields are its attributes.
    fn put(&mut self, field: &Field, value: Value) {
        match (field.name(), value) {
            ("message", Value::Str(text)) => self.name = text.into_string(),
            (key, value) => put(&mut self.attributes, &mut self.dropped_attributes, key, value),
        }
    }
}

/// Writes the fields tracing hands over, typed, into a span or an event.
pub struct Fields<'a, T: Put>(pub &'a mut T);

impl Fields<'_, SpanRecord> {
    /// The fields a span was created with.
    pub fn first(record: &mut SpanRecord, attrs: &tracing::span::Attributes<'_>) {
        record.attributes.reserve_exact(attrs.metadata().fields().len());
        attrs.record(&mut Fields(record));
    }
}

impl<T: Put> Visit for Fields<'_, T> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.put(field, Value::Str(value.into()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.put(field, Value::Int(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.put(field, unsigned(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.put(field, Value::Float(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.put(field, Value::Bool(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.put(field, Value::Str(value.to_string().into()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.put(field, Value::Str(format!("{value:?}").into()));
    }
}

/// OTLP integers are signed; a `u64` past `i64::MAX` goes as text rather than wrap.
fn unsigned(value: u64) -> Value {
    i64::try_from(value).map_or_else(|_| Value::Str(value.to_string().into()), Value::Int)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_rejects_malformed_values() {
        let mut span = SpanRecord::new("s", None, true);
        span.trace_id = 0x4bf92f3577b34da6a3ce929d0e0e4736;
        span.span_id = 0x00f067aa0ba902b7;
        let text = span.traceparent();
        assert_eq!(text, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert_eq!(
            parse_traceparent(&text),
            Some((0x4bf92f3577b34da6a3ce929d0e0e4736, 0x00f067aa0ba902b7, true))
        );
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-zzf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
    }

    #[test]
    fn otel_keys_steer_the_span_and_error_type_fails_it() {
        let mut span = SpanRecord::new("chat", None, true);
        span.set("otel.name", Value::Str("chat gpt-4.1".into()));
        span.set("otel.kind", Value::Str("client".into()));
        span.set("gen_ai.usage.input_tokens", Value::Int(1));
        span.set("gen_ai.usage.input_tokens", Value::Int(2));
        span.set("error.type", Value::Str("rate_limited".into()));
        assert_eq!(span.name, "chat gpt-4.1");
        assert_eq!(span.kind, Kind::Client);
        assert_eq!(
            span.attributes,
            vec![
                ("gen_ai.usage.input_tokens", Value::Int(2)),
                ("error.type", Value::Str("rate_limited".into()))
            ]
        );
        assert_eq!(span.error.as_deref(), Some("rate_limited"));
        assert_eq!(unsigned(u64::MAX), Value::Str(u64::MAX.to_string().into()));
    }

    #[test]
    fn attributes_and_events_past_the_caps_are_counted() {
        let mut span = SpanRecord::new("s", None, true);
        let keys: Vec<&'static str> = (0..MAX_ATTRIBUTES + 3)
            .map(|i| &*Box::leak(format!("k{i}").into_boxed_str()))
            .collect();
        for k in keys {
            span.set(k, Value::Bool(true));
        }
        assert_eq!(span.attributes.len(), MAX_ATTRIBUTES);
        assert_eq!(span.dropped_attributes, 3);
        for _ in 0..MAX_EVENTS + 2 {
            span.add_event(EventRecord {
                time_unix_nano: 1,
                name: "e".into(),
                attributes: Vec::new(),
                dropped_attributes: 0,
            });
        }
        assert_eq!(span.events.len(), MAX_EVENTS);
        assert_eq!(span.dropped_events, 2);
    }
}
