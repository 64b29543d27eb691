//! The OTLP trace exporter's settings from the standard `OTEL_*` variables.

use crate::config::Settings;
use crate::telemetry::{OtlpConfig, OtlpProtocol, TraceSampler};

/// Spans waiting to be sent, at most, unless `OTEL_BSP_MAX_QUEUE_SIZE` says otherwise:
/// twice the SDK's default (2,048), so a burst of runs on a slow collector drops less.
const DEFAULT_QUEUE: usize = 4096;
/// The processor allocates its queue up front: a larger one is refused at start.
const MAX_QUEUE: usize = 1 << 20;

/// The exporter to start, or `None` when no endpoint is set or `OTEL_SDK_DISABLED=true`
/// (then nothing is exported and nothing costs anything). A malformed value is an
/// error naming its variable.
pub fn config(s: &Settings) -> Result<Option<OtlpConfig>, String> {
    if s.otel_disabled {
        return Ok(None);
    }
    let protocol = match &s.otel_protocol {
        None => OtlpProtocol::HttpProtobuf,
        Some((var, value)) => match value.trim() {
            "http/protobuf" => OtlpProtocol::HttpProtobuf,
            "http/json" => OtlpProtocol::HttpJson,
            "grpc" if cfg!(feature = "grpc") => OtlpProtocol::Grpc,
            "grpc" => {
                return Err(format!(
                    "{var} 'grpc' needs a steward built with the grpc feature (cargo build --features grpc; the shipped image has it), or use http/protobuf on the collector's port 4318"
                ));
            }
            other => {
                return Err(format!(
                    "{var} '{other}' is not one of http/protobuf, http/json, grpc"
                ));
            }
        },
    };
    // Over HTTP the base endpoint gets the signal's path; gRPC takes it as it is.
    let (var, traces_url) = match (&s.otel_traces_endpoint, &s.otel_endpoint) {
        (Some(url), _) => ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url.trim().to_string()),
        (None, Some(base)) if protocol == OtlpProtocol::Grpc => {
            ("OTEL_EXPORTER_OTLP_ENDPOINT", base.trim().to_string())
        }
        (None, Some(base)) => (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("{}/v1/traces", base.trim().trim_end_matches('/')),
        ),
        (None, None) => return Ok(None),
    };
    if !(traces_url.starts_with("http://") || traces_url.starts_with("https://")) {
        return Err(format!("{var} '{traces_url}' is not an http:// or https:// URL"));
    }
    let queue = match &s.otel_bsp_queue {
        None => DEFAULT_QUEUE,
        Some(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_QUEUE).contains(n))
            .ok_or_else(|| {
                format!("OTEL_BSP_MAX_QUEUE_SIZE '{v}' is not a whole number of spans from 1 to {MAX_QUEUE}")
            })?,
    };
    let (headers_var, header_text) = s
        .otel_headers
        .clone()
        .unwrap_or(("OTEL_EXPORTER_OTLP_HEADERS", String::new()));
    Ok(Some(OtlpConfig {
        traces_url,
        headers: headers(&header_text).map_err(|e| format!("{headers_var}: {e}"))?,
        protocol,
        service_name: s.otel_service_name.clone(),
        sampler: sampler(s.otel_sampler.as_deref(), s.otel_sampler_arg.as_deref())?,
        queue,
    }))
}

/// `key=value,key2=value2`, values percent-decoded, as the OTLP exporter spec defines.
fn headers(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((k, v)) = entry.split_once('=') else {
            return Err(format!(
                "'{entry}' is not key=value (entries are separated by commas)"
            ));
        };
        let key = k.trim();
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!("'{key}' is not a header name"));
        }
        out.push((key.to_string(), percent_decode(v.trim())?));
    }
    Ok(out)
}

fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent-escape in '{text}'"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "a value is not UTF-8".to_string())
}

fn sampler(name: Option<&str>, arg: Option<&str>) -> Result<TraceSampler, String> {
    let ratio = || -> Result<f64, String> {
        match arg {
            None => Ok(1.0),
            Some(a) => a
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| format!("OTEL_TRACES_SAMPLER_ARG '{a}' is not a ratio between 0 and 1")),
        }
    };
    Ok(match name.map(str::trim) {
        None | Some("parentbased_always_on") => TraceSampler::ParentBasedAlwaysOn,
        Some("always_on") => TraceSampler::AlwaysOn,
        Some("always_off") => TraceSampler::AlwaysOff,
        Some("traceidratio") => TraceSampler::Ratio(ratio()?),
        Some("parentbased_always_off") => TraceSampler::ParentBasedAlwaysOff,
        Some("parentbased_traceidratio") => TraceSampler::ParentBasedRatio(ratio()?),
        Some(other) => {
            return Err(format!(
                "OTEL_TRACES_SAMPLER '{other}' is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio"
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        Settings::from_vars(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()))).unwrap()
    }

    #[test]
    fn endpoints_headers_and_samplers() {
        assert!(
            config(&settings(&[])).unwrap().is_none(),
            "no endpoint, no exporter"
        );
        let c = config(&settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "Authorization=Basic%20abc, x-team=ops",
            ),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.traces_url, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(
            c.headers,
            [
                ("Authorization".into(), "Basic abc".into()),
                ("x-team".into(), "ops".into())
            ]
        );
        assert_eq!(c.sampler, TraceSampler::ParentBasedRatio(0.25));
        assert_eq!(c.service_name, None);
        assert_eq!(c.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(c.queue, DEFAULT_QUEUE);
        let disabled = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x"),
            ("OTEL_SDK_DISABLED", "true"),
        ]);
        assert!(config(&disabled).unwrap().is_none());
    }

    #[test]
    fn malformed_values_name_their_variable() {
        let bad = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
        ]);
        assert_eq!(
            config(&bad).unwrap_err(),
            "OTEL_EXPORTER_OTLP_HEADERS: 'novalue' is not key=value (entries are separated by commas)"
        );
        let bad = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x"),
            ("OTEL_TRACES_SAMPLER", "sometimes"),
        ]);
        assert!(
            config(&bad)
                .unwrap_err()
                .starts_with("OTEL_TRACES_SAMPLER 'sometimes'")
        );
        let bad = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "k=%zz"),
        ]);
        assert_eq!(
            config(&bad).unwrap_err(),
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS: bad percent-escape in '%zz'"
        );
        let bad = settings(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318/v1/traces")]);
        assert!(
            config(&bad)
                .unwrap_err()
                .starts_with("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT 'collector:4318/v1/traces'")
        );
        // gRPC takes the endpoint as it is, in builds that have it.
        let grpc = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]);
        let grpc = config(&grpc);
        if cfg!(feature = "grpc") {
            let c = grpc.unwrap().unwrap();
            assert_eq!(c.protocol, OtlpProtocol::Grpc);
            assert_eq!(c.traces_url, "http://collector:4317");
        } else {
            assert!(grpc.unwrap_err().starts_with(
                "OTEL_EXPORTER_OTLP_PROTOCOL 'grpc' needs a steward built with the grpc feature"
            ));
        }
        let json = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "100"),
        ]);
        let c = config(&json).unwrap().unwrap();
        assert_eq!((c.protocol, c.queue), (OtlpProtocol::HttpJson, 100));
        let bad = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift"),
        ]);
        assert_eq!(
            config(&bad).unwrap_err(),
            "OTEL_EXPORTER_OTLP_PROTOCOL 'thrift' is not one of http/protobuf, http/json, grpc"
        );
        let bad = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "lots"),
        ]);
        assert!(
            config(&bad)
                .unwrap_err()
                .starts_with("OTEL_BSP_MAX_QUEUE_SIZE 'lots'")
        );
        let huge = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "100000000000"),
        ]);
        assert!(config(&huge).unwrap_err().contains("from 1 to 1048576"));
        let http = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
        ]);
        assert!(config(&http).unwrap().is_some());
        let bad = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")]);
        assert!(
            config(&bad)
                .unwrap_err()
                .contains("not an http:// or https:// URL")
        );
    }
}
