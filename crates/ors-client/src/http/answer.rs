//! Reading a server's answer: JSON bodies named by their endpoint, and error answers mapped to
//! a [`Failure`] with the server's `code`, `detail` and `Retry-After`.

use std::time::Duration;

use http::header::RETRY_AFTER;
use http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::Value;

use ors_core::protocol::{BACKEND_STARTING, HEADER_BACKEND_STATE};

use super::retry::Failure;
use crate::error::{Error, Result};

/// Decode a JSON body, naming the endpoint when it is not what ORS says it is.
pub(crate) fn decode_json<T: DeserializeOwned>(path: &str, body: &[u8]) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| {
        Error::Protocol(format!(
            "unexpected reply from {path}: {e} (body: {})",
            preview(body)
        ))
    })
}

/// A [`Failure::Status`] for an error response, with the server's `detail`.
pub(crate) fn status_failure(
    status: StatusCode,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Failure {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    // OpenAI's servers also send the delay in milliseconds, which is more precise.
    let retry_after = header("retry-after-ms")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1e3))
        .or_else(|| {
            header(RETRY_AFTER.as_str())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs)
        });
    let (code, detail) = code_and_detail(status, body);
    Failure::Status {
        error: Error::Http {
            status: status.as_u16(),
            code,
            detail,
        },
        status: status.as_u16(),
        retry_after,
        starting: status == StatusCode::SERVICE_UNAVAILABLE
            && headers
                .get(HEADER_BACKEND_STATE)
                .is_some_and(|v| v.as_bytes() == BACKEND_STARTING.as_bytes()),
    }
}

/// The `code` and `detail` of an error body. The detail is the string, the JSON of a
/// structured detail (FastAPI's validation errors), the raw text, or the status's reason when
/// the body is empty; the code is there only when the server sent a string one.
pub(crate) fn code_and_detail(status: StatusCode, body: &[u8]) -> (Option<String>, String) {
    let v: Value = serde_json::from_slice(body).unwrap_or_default();
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let code = text(&v, "code");
    if let Some(d) = v.get("detail") {
        let detail = d.as_str().map_or_else(|| d.to_string(), str::to_owned);
        return (code, detail);
    }
    // OpenAI's and Anthropic's `{"error": {"message", "type", "code"}}`, and the bare
    // `{"error": "..."}` of some compatible servers.
    let error = &v["error"];
    if let Some(s) = error.as_str() {
        return (code, s.to_owned());
    }
    if let Some(message) = text(error, "message") {
        return (text(error, "code").or_else(|| text(error, "type")), message);
    }
    let raw = preview(body);
    let reason = status.canonical_reason().unwrap_or("error");
    let detail = if raw.is_empty() { reason.into() } else { raw };
    (None, detail)
}

/// At most 300 characters of a body, on one line, for error messages.
pub(crate) fn preview(body: &[u8]) -> String {
    ors_core::text::preview(&String::from_utf8_lossy(body), 300)
}

#[cfg(test)]
mod tests {
    use super::super::retry::Starting;
    use super::*;
    use http::HeaderValue;

    #[test]
    fn codes_and_details_come_from_json_or_text() {
        let s = StatusCode::BAD_REQUEST;
        let detail = |body: &[u8]| code_and_detail(s, body).1;
        assert_eq!(
            code_and_detail(s, br#"{"detail":"Invalid index","code":"invalid_request"}"#),
            (Some("invalid_request".into()), "Invalid index".into())
        );
        assert_eq!(
            code_and_detail(s, br#"{"detail":"Invalid index"}"#),
            (None, "Invalid index".into())
        );
        assert_eq!(
            detail(br#"{"detail":[{"loc":["body","split"]}]}"#),
            r#"[{"loc":["body","split"]}]"#
        );
        assert_eq!(detail(b"plain\ntext"), "plain text");
        assert_eq!(
            code_and_detail(
                s,
                br#"{"error":{"message":"bad role","type":"invalid_request_error","code":null}}"#
            ),
            (Some("invalid_request_error".into()), "bad role".into())
        );
        assert_eq!(
            code_and_detail(
                s,
                br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#
            ),
            (Some("rate_limit_error".into()), "slow down".into())
        );
        assert_eq!(detail(br#"{"error":"model not found"}"#), "model not found");
        assert_eq!(
            code_and_detail(StatusCode::NOT_FOUND, b""),
            (None, "Not Found".into())
        );
    }

    #[test]
    fn a_503_starting_is_told_apart_and_waited_for_within_the_bound() {
        let mut headers = http::HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        assert!(!status_failure(StatusCode::SERVICE_UNAVAILABLE, &headers, b"{}").starting());
        headers.insert(HEADER_BACKEND_STATE, HeaderValue::from_static("starting"));
        let f = status_failure(StatusCode::SERVICE_UNAVAILABLE, &headers, b"{}");
        assert!(f.starting());
        assert_eq!(f.retry_after(), Some(Duration::from_secs(2)));
        assert!(!status_failure(StatusCode::BAD_GATEWAY, &headers, b"{}").starting());
        let mut clock = Starting::default();
        assert!(clock.keep_waiting(Duration::from_secs(60)));
        assert!(!clock.keep_waiting(Duration::ZERO));
    }
}
