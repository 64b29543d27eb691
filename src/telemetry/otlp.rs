//! OTLP/HTTP protobuf bodies: a batch of [`SpanRecord`]s as one
//! `ExportTraceServiceRequest` (one resource, one instrumentation scope), in the wire
//! types of `opentelemetry-proto` and encoded with prost.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
pub use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::{Event, SpanKind};
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use prost::Message;

use super::record::{EventRecord, Kind, SpanRecord, Value};

/// Span flags: the W3C sampled bit, and that the `is_remote` bit of the parent is known
/// (and, with `0x200`, set), as the OTLP spec defines them.
const FLAG_SAMPLED: u32 = 0x01;
const FLAG_HAS_IS_REMOTE: u32 = 0x100;
const FLAG_IS_REMOTE: u32 = 0x200;

/// The resource every span of this process belongs to.
pub fn resource(service_name: &str) -> Resource {
    Resource {
        attributes: vec![
            key_value("service.name", Value::Str(service_name.to_string())),
            key_value("service.version", Value::Str(env!("CARGO_PKG_VERSION").into())),
            key_value("telemetry.sdk.language", Value::Str("rust".into())),
            key_value("telemetry.sdk.name", Value::Str("steward".into())),
        ],
        ..Resource::default()
    }
}

/// The request body for `spans`.
pub fn encode(resource: &Resource, spans: Vec<SpanRecord>) -> Vec<u8> {
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource.clone()),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "steward".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..InstrumentationScope::default()
                }),
                spans: spans.into_iter().map(span).collect(),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    };
    request.encode_to_vec()
}

fn span(r: SpanRecord) -> Span {
    let mut flags = FLAG_HAS_IS_REMOTE | if r.sampled { FLAG_SAMPLED } else { 0 };
    if r.parent_remote {
        flags |= FLAG_IS_REMOTE;
    }
    Span {
        trace_id: r.trace_id.to_be_bytes().to_vec(),
        span_id: r.span_id.to_be_bytes().to_vec(),
        parent_span_id: if r.parent_span_id == 0 {
            Vec::new()
        } else {
            r.parent_span_id.to_be_bytes().to_vec()
        },
        flags,
        name: r.name.into_owned(),
        kind: kind(r.kind) as i32,
        start_time_unix_nano: r.start_unix_nano,
        end_time_unix_nano: r.end_unix_nano,
        attributes: r.attributes.into_iter().map(|(k, v)| key_value(k, v)).collect(),
        dropped_attributes_count: r.dropped_attributes,
        events: r.events.into_iter().map(event).collect(),
        dropped_events_count: r.dropped_events,
        status: Some(match r.error {
            Some(message) => Status {
                message,
                code: StatusCode::Error as i32,
            },
            None => Status::default(),
        }),
        ..Span::default()
    }
}

fn event(e: EventRecord) -> Event {
    Event {
        time_unix_nano: e.time_unix_nano,
        name: e.name,
        attributes: e.attributes.into_iter().map(|(k, v)| key_value(k, v)).collect(),
        dropped_attributes_count: e.dropped_attributes,
    }
}

fn kind(k: Kind) -> SpanKind {
    match k {
        Kind::Internal => SpanKind::Internal,
        Kind::Server => SpanKind::Server,
        Kind::Client => SpanKind::Client,
        Kind::Producer => SpanKind::Producer,
        Kind::Consumer => SpanKind::Consumer,
    }
}

fn key_value(key: &str, value: Value) -> KeyValue {
    let value = match value {
        Value::Str(s) => any_value::Value::StringValue(s),
        Value::Int(i) => any_value::Value::IntValue(i),
        Value::Float(f) => any_value::Value::DoubleValue(f),
        Value::Bool(b) => any_value::Value::BoolValue(b),
    };
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_decodes_as_the_collector_reads_it() {
        let mut root = SpanRecord::new("invoke_agent", None, true);
        root.set("otel.name", Value::Str("invoke_agent helpdesk".into()));
        root.set("steward.turns", Value::Int(3));
        root.parent_span_id = 0x1234;
        root.parent_remote = true;
        let mut chat = SpanRecord::new("chat", Some((root.trace_id, root.span_id, true)), true);
        chat.set("otel.kind", Value::Str("client".into()));
        chat.set("steward.cost_usd", Value::Float(0.5));
        chat.set("error.type", Value::Str("timeout".into()));
        chat.add_event(EventRecord {
            time_unix_nano: 7,
            name: "retry".into(),
            attributes: vec![("attempt", Value::Int(2))],
            dropped_attributes: 0,
        });
        let body = encode(&resource("svc"), vec![root.clone(), chat.clone()]);

        let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        let rs = &request.resource_spans[0];
        let service = &rs.resource.as_ref().unwrap().attributes[0];
        assert_eq!(service.key, "service.name");
        let spans = &rs.scope_spans[0].spans;
        assert_eq!(spans[0].name, "invoke_agent helpdesk");
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
        assert_eq!(
            spans[1].attributes[0].value,
            Some(AnyValue {
                value: Some(any_value::Value::DoubleValue(0.5))
            })
        );
    }
}
