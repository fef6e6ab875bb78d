//! Creating a session on the server: minting its id (a JSON or an SSE reply), the `/create`
//! request with the secrets where the server wants them, and releasing an id whose create
//! failed.

use base64::Engine as _;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use ors_core::protocol::{routes, HEADER_SECRETS};
use ors_core::sse::{SseDecoder, EVENT_TASK_ID};
use ors_core::{CreateSession, Secrets, SessionId};
use serde_json::{Map, Value};

use crate::config::SecretsMode;
use crate::error::{Error, Result};
use crate::http::{decode_json, secret_header, Http, Req, Retry};

/// `POST /create_session`, accepting a JSON `{"sid"}` reply or an SSE `task_id` event.
pub(super) async fn create_session_id(http: &Http) -> Result<String> {
    // JSON is asked for; the reference server answers SSE regardless, and both are read.
    let req = Req::post(routes::CREATE_SESSION);
    // A repeat only mints another unused id, so this is safe to retry.
    let (headers, body) = http.fetch(&req, Retry::Idempotent).await?;
    let is_sse = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    let sid = if is_sse || !body.trim_ascii_start().starts_with(b"{") {
        SseDecoder::new()
            .push(&body)
            .into_iter()
            .find(|e| e.event == EVENT_TASK_ID)
            .map(|e| e.data.trim().to_owned())
            .ok_or_else(|| {
                Error::Protocol("/create_session sent neither {\"sid\"} nor a task_id event".into())
            })?
    } else {
        decode_json::<SessionId>(routes::CREATE_SESSION, &body)?.sid
    };
    if sid.is_empty() {
        return Err(Error::Protocol(
            "/create_session sent an empty session id".into(),
        ));
    }
    Ok(sid)
}

/// The `/create` request with the secrets where `mode` puts them (`Auto`: the body).
pub(super) fn create_request(
    sid: &str,
    mut body: CreateSession,
    secrets: &Secrets,
    mode: SecretsMode,
) -> Result<Req> {
    let mut req = Req::post(routes::CREATE).sid(sid);
    if !secrets.is_empty() {
        if mode != SecretsMode::Header {
            body = body.secrets(secrets.clone());
        }
        if matches!(mode, SecretsMode::Header | SecretsMode::Both) {
            let value = secrets_header(secrets)?;
            req.extra
                .push((HeaderName::from_static(HEADER_SECRETS), value));
        }
    }
    req.json(&body)
}

/// Whether `/create` was refused for its body's `secrets` field: the `openreward` server's
/// 422 `extra_forbidden` naming it (PROTOCOL_NOTES row `secrets-forms`).
pub(super) fn refuses_body_secrets(e: &Error) -> bool {
    matches!(e, Error::Http { status: 422, detail, .. } if detail.contains("secrets"))
}

/// Best-effort `POST /delete_session` for an id whose `/create` failed.
pub(super) async fn release_id(http: &Http, sid: &str) {
    let req = Req::post(routes::DELETE_SESSION).sid(sid);
    if let Err(e) = http.fetch(&req, Retry::Refused).await {
        tracing::debug!(sid, error = %e, "delete_session after a failed create also failed");
    }
}

/// The `X-Secrets` header: base64 of `{"KEY": {"value": "V", "allowed_domains": [...]}}`
/// (the domains only when given).
fn secrets_header(secrets: &Secrets) -> Result<HeaderValue> {
    let map: Map<String, Value> = secrets
        .iter()
        .map(|(k, v)| {
            let mut entry = serde_json::json!({ "value": v });
            if let Some(domains) = secrets.allowed_domains(k) {
                entry["allowed_domains"] = serde_json::json!(domains);
            }
            (k.to_owned(), entry)
        })
        .collect();
    let encoded = base64::engine::general_purpose::STANDARD.encode(Value::Object(map).to_string());
    secret_header(&encoded, "the secrets header")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_header_is_the_reference_form() {
        let s: Secrets = [("KEY", "v")].into_iter().collect();
        let h = secrets_header(&s).unwrap();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(h.as_bytes())
            .unwrap();
        let v: Value = serde_json::from_slice(&raw).unwrap();
        assert_eq!(v, serde_json::json!({"KEY": {"value": "v"}}));
        assert!(h.is_sensitive());
    }
}
