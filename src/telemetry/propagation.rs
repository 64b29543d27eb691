//! W3C trace context in and out, through the SDK's `TraceContextPropagator`:
//! - **in**: a webhook request's `traceparent`/`tracestate` headers make the ingest span
//!   (and so the run) part of the sender's trace ([`from_headers`]);
//! - **out**: model calls and tool calls send the `traceparent` of their own span
//!   ([`outgoing`], set around the call by the chain and the gateway with [`sending`]),
//!   so a provider's or a service's traces join steward's.

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// Up to two header values, as the propagator reads them.
struct Pair<'a> {
    traceparent: &'a str,
    tracestate: Option<&'a str>,
}

impl Extractor for Pair<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => Some(self.traceparent),
            "tracestate" => self.tracestate,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent", "tracestate"]
    }
}

/// The remote span `traceparent` (with its `tracestate`) names; `None` when the value is
/// malformed or names no valid span.
pub fn extract(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    // The propagator takes shorter ids than W3C's 32 and 16 hex digits; those are
    // refused here, as the specification says.
    let traceparent = traceparent.trim();
    let lengths: Vec<usize> = traceparent.split('-').map(str::len).collect();
    if lengths.get(..4) != Some(&[2, 32, 16, 2]) {
        return None;
    }
    let cx = TraceContextPropagator::new().extract(&Pair {
        traceparent,
        tracestate,
    });
    let remote = cx.span().span_context().clone();
    remote.is_valid().then_some(remote)
}

/// The remote parent a request's `traceparent` and `tracestate` headers name, if any.
pub fn from_headers(headers: &reqwest::header::HeaderMap) -> Option<SpanContext> {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    extract(value("traceparent")?, value("tracestate"))
}

/// The W3C `traceparent` of `span`, written directly: what the propagator injects
/// (the tests hold the two equal), without the context and map it builds,
/// which on every model and tool request cost more than the request's own headers.
pub fn traceparent(span: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        span.trace_id(),
        span.span_id(),
        span.trace_flags().to_u8()
    )
}

tokio::task_local! {
    /// The span an outgoing request is made for (a model call's, a tool call's).
    static SENDING: SpanContext;
}

/// Runs `fut` with `span` as the span its outgoing requests carry ([`outgoing`]). With
/// no span (nothing is exported), `fut` runs as it is.
pub async fn sending<F: std::future::Future>(span: Option<SpanContext>, fut: F) -> F::Output {
    match span {
        Some(span) => SENDING.scope(span, fut).await,
        None => fut.await,
    }
}

/// `request` with the trace context of the call it is made for, when there is one.
pub fn outgoing(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    let found = SENDING.try_with(|span| {
        let state = span.trace_state().header();
        (traceparent(span), (!state.is_empty()).then_some(state))
    });
    match found {
        Ok((parent, None)) => request.header("traceparent", parent),
        Ok((parent, Some(state))) => request.header("traceparent", parent).header("tracestate", state),
        Err(_) => request,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::Context;
    use opentelemetry::propagation::Injector;
    use std::collections::HashMap;

    /// The headers that carry `span` to another process: `traceparent`, and `tracestate`
    /// when it has one.
    fn headers(span: &SpanContext) -> HashMap<String, String> {
        let mut out = HashMap::with_capacity(2);
        let cx = Context::new().with_remote_span_context(span.clone());
        TraceContextPropagator::new().inject_context(&cx, &mut Carrier(&mut out));
        out
    }

    struct Carrier<'a>(&'a mut HashMap<String, String>);

    impl Injector for Carrier<'_> {
        fn set(&mut self, key: &str, value: String) {
            self.0.insert(key.to_string(), value);
        }
    }

    #[test]
    fn traceparent_round_trips_and_malformed_values_are_refused() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let span = extract(text, Some("vendor=abc")).unwrap();
        assert!(span.is_remote() && span.is_sampled());
        assert_eq!(traceparent(&span), text);
        assert_eq!(headers(&span)["traceparent"], text, "as the propagator writes it");
        assert_eq!(headers(&span)["tracestate"], "vendor=abc");
        let unsampled = extract("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", None).unwrap();
        assert_eq!(traceparent(&unsampled), headers(&unsampled)["traceparent"]);
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-zzf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(extract(bad, None).is_none(), "{bad}");
        }
    }
}
