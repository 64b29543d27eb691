//! Traces over OTLP/gRPC (`OTEL_EXPORTER_OTLP_PROTOCOL=grpc`), in builds with the `grpc`
//! feature (the shipped image's): `steward run` exports to a collector on 127.0.0.1 that
//! speaks gRPC over HTTP/2 cleartext as a collector's port 4317 does, decoding each
//! `TraceService/Export` call's `ExportTraceServiceRequest`.
//!
//! `cargo test --features grpc --test telemetry_grpc`
#![cfg(feature = "grpc")]

mod support;

use std::convert::Infallible;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use support::*;

/// What the collector received: each call's path and metadata, and its spans.
#[derive(Default)]
struct Received {
    calls: Vec<(String, Option<String>)>,
    spans: Vec<Span>,
}

/// A gRPC collector: answers every call with an empty `ExportTraceServiceResponse` and
/// `grpc-status: 0` in the trailers.
async fn grpc_collector() -> (String, Arc<Mutex<Received>>) {
    let received: Arc<Mutex<Received>> = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = received.clone();
    tokio::spawn(async move {
        loop {
            let (io, _) = listener.accept().await.unwrap();
            let seen = seen.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                        let seen = seen.clone();
                        async move {
                            let path = request.uri().path().to_string();
                            let auth = request
                                .headers()
                                .get("authorization")
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_string);
                            let body = request.into_body().collect().await.unwrap().to_bytes();
                            // gRPC's length-prefixed message: a compression flag, a length.
                            assert_eq!(body[0], 0, "uncompressed");
                            let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
                            let export = ExportTraceServiceRequest::decode(&body[5..5 + len]).unwrap();
                            let mut seen = seen.lock().unwrap();
                            seen.calls.push((path, auth));
                            for rs in export.resource_spans {
                                for ss in rs.scope_spans {
                                    seen.spans.extend(ss.spans);
                                }
                            }
                            let mut trailers = hyper::HeaderMap::new();
                            trailers.insert("grpc-status", "0".parse().unwrap());
                            let frames = vec![
                                Ok::<_, Infallible>(Frame::data(Bytes::from_static(&[0, 0, 0, 0, 0]))),
                                Ok(Frame::trailers(trailers)),
                            ];
                            let body = StreamBody::new(futures_util::stream::iter(frames));
                            Ok::<_, Infallible>(
                                hyper::Response::builder()
                                    .header("content-type", "application/grpc")
                                    .body(body)
                                    .unwrap(),
                            )
                        }
                    });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(io), service)
                    .await;
            });
        }
    });
    (format!("http://{addr}"), received)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_exports_its_spans_over_grpc() {
    let (collector, received) = grpc_collector().await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("A short summary.")));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steward.db");
    let ev = dir.path().join("e.json");
    std::fs::write(&ev, r#"{"text": "summarize this"}"#).unwrap();
    let base = format!("{}/v1", fake.url);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
            .args(["run", "page-summarizer", "--event", ev.to_str().unwrap()])
            .env("STEWARD_ROOT", &repo)
            .env("DATABASE_URL", format!("sqlite://{}", db.display()))
            .env("OPENAI_BASE_URL", base)
            .env("OPENAI_API_KEY", "sk-test")
            .env_remove("ANTHROPIC_API_KEY")
            .env("RUST_LOG", "error")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector)
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
            .env(
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20collector-token",
            )
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let received = received.lock().unwrap();
    assert!(!received.calls.is_empty(), "no export call arrived");
    for (path, auth) in &received.calls {
        assert_eq!(
            path,
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
        );
        assert_eq!(
            auth.as_deref(),
            Some("Bearer collector-token"),
            "the header as gRPC metadata"
        );
    }
    let names: Vec<&str> = received.spans.iter().map(|s| s.name.as_str()).collect();
    let run = received
        .spans
        .iter()
        .find(|s| s.name == "invoke_agent page-summarizer")
        .unwrap_or_else(|| panic!("no run span in {names:?}"));
    let chat = received
        .spans
        .iter()
        .find(|s| s.name.starts_with("chat "))
        .unwrap_or_else(|| panic!("no chat span in {names:?}"));
    assert_eq!(chat.trace_id, run.trace_id);
}
