//! OTLP/HTTP protobuf bodies: a batch of [`SpanRecord`]s as one
//! `ExportTraceServiceRequest` (one resource, one instrumentation scope), written
//! straight from the records in one pass.
//!
//! The message layout is `opentelemetry/proto/collector/trace/v1` and its imports
//! (field numbers below). Going through the generated `opentelemetry-proto` types cost
//! an allocation per attribute key and value and a length pass per nesting level; this
//! writer costs neither. The tests decode its output with those generated types, as a
//! collector would.

use std::borrow::Cow;

use super::record::{EventRecord, Kind, SpanRecord, Value};

/// Span flags: the W3C sampled bit, and that the `is_remote` bit of the parent is known
/// (and, with `0x200`, set), as the OTLP spec defines them.
const FLAG_SAMPLED: u32 = 0x01;
const FLAG_HAS_IS_REMOTE: u32 = 0x100;
const FLAG_IS_REMOTE: u32 = 0x200;

/// `Status.code = STATUS_CODE_ERROR`.
const STATUS_ERROR: u64 = 2;

/// Protobuf wire types.
const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;
const FIXED32: u32 = 5;

/// The resource every span of this process belongs to, encoded once (the body of a
/// `Resource` message).
#[derive(Debug, Clone)]
pub struct Resource(Vec<u8>);

/// The resource for `service_name`.
pub fn resource(service_name: &str) -> Resource {
    let mut buf = Vec::new();
    for (key, value) in [
        ("service.name", service_name),
        ("service.version", env!("CARGO_PKG_VERSION")),
        ("telemetry.sdk.language", "rust"),
        ("telemetry.sdk.name", "steward"),
    ] {
        // Resource.attributes = 1
        message(&mut buf, 1, |b| key_value(b, key, &Value::Str(value.into())));
    }
    Resource(buf)
}

/// The request body for `spans`.
pub fn encode(resource: &Resource, spans: &[SpanRecord]) -> Vec<u8> {
    // The spans first, each framed as `ScopeSpans.spans = 2`; the three enclosing
    // messages' lengths then follow from theirs, so the batch is copied once rather than
    // moved over at each level.
    let mut body = Vec::with_capacity(spans.len() * 768);
    for s in spans {
        message(&mut body, 2, |b| span(b, s));
    }
    // ScopeSpans.scope = 1: InstrumentationScope { name = 1, version = 2 }
    let mut scope = Vec::with_capacity(32);
    message(&mut scope, 1, |b| {
        bytes(b, 1, b"steward");
        bytes(b, 2, env!("CARGO_PKG_VERSION").as_bytes());
    });
    let scope_spans = scope.len() + body.len();
    // ResourceSpans { resource = 1, scope_spans = 2 }
    let resource_spans = field_len(resource.0.len()) + field_len(scope_spans);
    let mut out = Vec::with_capacity(field_len(resource_spans));
    // ExportTraceServiceRequest.resource_spans = 1
    tag(&mut out, 1, LEN);
    varint(&mut out, resource_spans as u64);
    bytes(&mut out, 1, &resource.0);
    tag(&mut out, 2, LEN);
    varint(&mut out, scope_spans as u64);
    out.extend_from_slice(&scope);
    out.extend_from_slice(&body);
    out
}

/// The encoded size of a length-delimited field (one-byte tag) holding `len` bytes.
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn span(b: &mut Vec<u8>, r: &SpanRecord) {
    let mut flags = FLAG_HAS_IS_REMOTE | if r.sampled { FLAG_SAMPLED } else { 0 };
    if r.parent_remote {
        flags |= FLAG_IS_REMOTE;
    }
    bytes(b, 1, &r.trace_id.to_be_bytes());
    bytes(b, 2, &r.span_id.to_be_bytes());
    if r.parent_span_id != 0 {
        bytes(b, 4, &r.parent_span_id.to_be_bytes());
    }
    name(b, r);
    uint(b, 6, kind(r.kind));
    fixed64(b, 7, r.start_unix_nano);
    fixed64(b, 8, r.end_unix_nano);
    for (k, v) in &r.attributes {
        message(b, 9, |b| key_value(b, k, v));
    }
    uint(b, 10, u64::from(r.dropped_attributes));
    for e in &r.events {
        message(b, 11, |b| event(b, e));
    }
    uint(b, 12, u64::from(r.dropped_events));
    if let Some(text) = &r.error {
        // Status { message = 2, code = 3 }
        message(b, 15, |b| {
            bytes(b, 2, text.as_bytes());
            uint(b, 3, STATUS_ERROR);
        });
    }
    tag(b, 16, FIXED32);
    b.extend_from_slice(&flags.to_le_bytes());
}

/// The span's name (`Span.name = 5`): `otel.name` when the code gave one; else, for the
/// GenAI operations, the conventions' `{operation} {subject}` (`chat gpt-4.1`,
/// `execute_tool http_fetch`, `invoke_agent helpdesk`), written here on the export
/// thread in its two parts rather than composed by a `format!`; else the tracing span's
/// name.
fn name(b: &mut Vec<u8>, r: &SpanRecord) {
    let subject = match (&r.name, r.name.as_ref()) {
        (Cow::Owned(_), _) => None,
        (_, "chat") => Some("gen_ai.request.model"),
        (_, "execute_tool") => Some("gen_ai.tool.name"),
        (_, "invoke_agent") => Some("gen_ai.agent.name"),
        _ => None,
    }
    .and_then(|key| {
        r.attributes.iter().find_map(|(k, v)| match v {
            Value::Str(s) if *k == key => Some(s.as_str()),
            _ => None,
        })
    });
    match subject {
        Some(subject) => {
            tag(b, 5, LEN);
            varint(b, (r.name.len() + 1 + subject.len()) as u64);
            b.extend_from_slice(r.name.as_bytes());
            b.push(b' ');
            b.extend_from_slice(subject.as_bytes());
        }
        None => bytes(b, 5, r.name.as_bytes()),
    }
}

fn event(b: &mut Vec<u8>, e: &EventRecord) {
    fixed64(b, 1, e.time_unix_nano);
    bytes(b, 2, e.name.as_bytes());
    for (k, v) in &e.attributes {
        message(b, 3, |b| key_value(b, k, v));
    }
    uint(b, 4, u64::from(e.dropped_attributes));
}

fn kind(k: Kind) -> u64 {
    match k {
        Kind::Internal => 1,
        Kind::Server => 2,
        Kind::Client => 3,
        Kind::Producer => 4,
        Kind::Consumer => 5,
    }
}

/// Attributes the GenAI conventions type as string arrays. tracing's fields carry one
/// string, comma-separated; the encoder writes them as an OTLP array.
const STRING_ARRAYS: [&str; 1] = ["gen_ai.response.finish_reasons"];

/// `KeyValue { key = 1, value = 2: AnyValue }`.
fn key_value(b: &mut Vec<u8>, key: &str, value: &Value) {
    bytes(b, 1, key.as_bytes());
    message(b, 2, |b| match value {
        // AnyValue { string_value = 1, bool_value = 2, int_value = 3, double_value = 4,
        // array_value = 5: ArrayValue { values = 1: AnyValue } }
        Value::Str(s) if STRING_ARRAYS.contains(&key) => message(b, 5, |b| {
            for item in s.as_str().split(',').filter(|i| !i.is_empty()) {
                message(b, 1, |b| bytes(b, 1, item.as_bytes()));
            }
        }),
        Value::Str(s) => bytes(b, 1, s.as_str().as_bytes()),
        Value::Bool(v) => {
            tag(b, 2, VARINT);
            b.push(u8::from(*v));
        }
        Value::Int(i) => {
            tag(b, 3, VARINT);
            varint(b, *i as u64);
        }
        Value::Float(f) => fixed64(b, 4, f.to_bits()),
    });
}

fn tag(b: &mut Vec<u8>, field: u32, wire: u32) {
    varint(b, u64::from((field << 3) | wire));
}

fn varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

/// A varint field, left out when zero (proto3's default).
fn uint(b: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        tag(b, field, VARINT);
        varint(b, v);
    }
}

fn fixed64(b: &mut Vec<u8>, field: u32, v: u64) {
    tag(b, field, FIXED64);
    b.extend_from_slice(&v.to_le_bytes());
}

/// A length-delimited field holding `data` (bytes, a string or an encoded message).
fn bytes(b: &mut Vec<u8>, field: u32, data: &[u8]) {
    tag(b, field, LEN);
    varint(b, data.len() as u64);
    b.extend_from_slice(data);
}

/// A length-delimited field whose body `body` writes. One byte is kept for the length;
/// a body of 128 bytes or more moves over by the extra length bytes once written.
fn message(b: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    tag(b, field, LEN);
    let at = b.len();
    b.push(0);
    body(b);
    let len = b.len() - at - 1;
    if len < 0x80 {
        b[at] = len as u8;
    } else {
        // The length's varint on the stack (no allocation per large message).
        let mut prefix = [0u8; 10];
        let mut n = 0;
        let mut v = len as u64;
        while v >= 0x80 {
            prefix[n] = (v as u8) | 0x80;
            v >>= 7;
            n += 1;
        }
        prefix[n] = v as u8;
        n += 1;
        debug_assert_eq!(n, varint_len(len as u64));
        b.splice(at..at + 1, prefix[..n].iter().copied());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
    use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
    use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
    use prost::Message;

    #[test]
    fn varint_lengths() {
        for v in [0u64, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v), "{v}");
        }
    }

    #[test]
    fn a_large_batch_decodes_whole() {
        let spans: Vec<SpanRecord> = (0..600)
            .map(|i| {
                let mut s = SpanRecord::new("execute_tool", None, true);
                s.set("steward.tool.result_bytes", Value::Int(i));
                s
            })
            .collect();
        let body = encode(&resource("svc"), &spans);
        let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        let got = &request.resource_spans[0].scope_spans[0].spans;
        assert_eq!(got.len(), 600);
        assert_eq!(got[599].span_id, spans[599].span_id.to_be_bytes());
    }

    #[test]
    fn a_batch_decodes_as_the_collector_reads_it() {
        let mut root = SpanRecord::new("invoke_agent", None, true);
        root.set("otel.name", Value::Str("invoke_agent helpdesk".into()));
        root.set("steward.turns", Value::Int(3));
        root.parent_span_id = 0x1234;
        root.parent_remote = true;
        let mut chat = SpanRecord::new("chat", Some((root.trace_id, root.span_id)), true);
        chat.set("otel.kind", Value::Str("client".into()));
        chat.set("steward.cost_usd", Value::Float(0.5));
        // Lengths of one, two and three varint bytes; a negative and a boolean value.
        chat.set("gen_ai.input.messages", Value::Str("x".repeat(20_000).into()));
        chat.set("gen_ai.tool.call.id", Value::Str("y".repeat(200).into()));
        chat.set("steward.delta", Value::Int(-3));
        chat.set("steward.fallback", Value::Bool(true));
        chat.set("error.type", Value::Str("timeout".into()));
        chat.set("gen_ai.response.finish_reasons", Value::Str("length".into()));
        chat.add_event(EventRecord {
            time_unix_nano: 7,
            name: "retry".into(),
            attributes: vec![("attempt", Value::Int(2))],
            dropped_attributes: 0,
        });
        let body = encode(&resource("svc"), &[root.clone(), chat.clone()]);

        let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        let rs = &request.resource_spans[0];
        let service = &rs.resource.as_ref().unwrap().attributes[0];
        assert_eq!(service.key, "service.name");
        let spans = &rs.scope_spans[0].spans;
        assert_eq!(spans[0].name, "invoke_agent helpdesk");
        // Without `otel.name`, a GenAI span is named by the conventions.
        let mut tool = SpanRecord::new("execute_tool", None, true);
        tool.set("gen_ai.tool.name", Value::Str("http_fetch".into()));
        let names = |spans: &[SpanRecord]| -> Vec<String> {
            let body = encode(&resource("svc"), spans);
            let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
            request.resource_spans[0].scope_spans[0]
                .spans
                .iter()
                .map(|s| s.name.clone())
                .collect()
        };
        assert_eq!(
            names(&[tool, SpanRecord::new("compaction", None, true)]),
            ["execute_tool http_fetch", "compaction"]
        );
        assert_eq!(spans[0].trace_id, root.trace_id.to_be_bytes());
        assert_eq!(spans[0].parent_span_id, 0x1234u64.to_be_bytes());
        assert_eq!(spans[0].flags, 0x301);
        assert_eq!(spans[1].parent_span_id, root.span_id.to_be_bytes());
        assert_eq!(spans[1].kind, SpanKind::Client as i32);
        assert_eq!(spans[1].flags, 0x101);
        let status = spans[1].status.as_ref().unwrap();
        assert_eq!(
            (status.code, status.message.as_str()),
            (StatusCode::Error as i32, "timeout")
        );
        assert_eq!(spans[1].events[0].name, "retry");
        let value = |i: usize| spans[1].attributes[i].value.clone().and_then(|v| v.value);
        assert_eq!(value(0), Some(any_value::Value::DoubleValue(0.5)));
        assert_eq!(value(1), Some(any_value::Value::StringValue("x".repeat(20_000))));
        assert_eq!(value(2), Some(any_value::Value::StringValue("y".repeat(200))));
        assert_eq!(value(3), Some(any_value::Value::IntValue(-3)));
        assert_eq!(value(4), Some(any_value::Value::BoolValue(true)));
        assert_eq!(spans[1].attributes[5].key, "error.type");
        // A string array by the conventions.
        let Some(any_value::Value::ArrayValue(reasons)) = value(6) else {
            panic!("finish_reasons is not an array: {:?}", value(6));
        };
        assert_eq!(
            reasons.values,
            [AnyValue {
                value: Some(any_value::Value::StringValue("length".into()))
            }]
        );
        assert_eq!(
            spans[1].events[0].attributes[0].value,
            Some(AnyValue {
                value: Some(any_value::Value::IntValue(2))
            })
        );
        assert_eq!(spans[0].start_time_unix_nano, root.start_unix_nano);
    }
}
