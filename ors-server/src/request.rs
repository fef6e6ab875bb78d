//! Reading what a request says: the session id header, the `X-Secrets` header, the API key,
//! content negotiation, and JSON bodies checked field by field so a 400 names the field
//! (PROTOCOL_NOTES row `bad-body-400`).

use base64::Engine as _;
use bytes::Bytes;
use http::header::{HeaderName, ACCEPT, AUTHORIZATION};
use http::HeaderMap;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use ors_core::types::Secrets;

use crate::error::ApiError;

// Named once: looking a header up by `&str` parses and hashes the name on every request.
const X_SESSION_ID: HeaderName = HeaderName::from_static("x-session-id");
const X_SECRETS: HeaderName = HeaderName::from_static("x-secrets");
const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");

/// Longest accepted session id, in characters.
pub(crate) const MAX_SESSION_ID_LEN: usize = 128;

/// The trimmed `X-Session-ID`: required, at most 128 printable characters.
pub(crate) fn session_id(headers: &HeaderMap) -> Result<&str, ApiError> {
    let raw = headers
        .get(X_SESSION_ID)
        .ok_or(ApiError::MissingSessionId)?;
    let sid = raw
        .to_str()
        .map_err(|_| ApiError::InvalidSessionId("it must be printable ASCII"))?
        .trim();
    if sid.is_empty() {
        return Err(ApiError::MissingSessionId);
    }
    if sid.len() > MAX_SESSION_ID_LEN {
        return Err(ApiError::InvalidSessionId(
            "it is longer than 128 characters",
        ));
    }
    if sid.chars().any(char::is_control) {
        return Err(ApiError::InvalidSessionId("it contains control characters"));
    }
    Ok(sid)
}

/// Secrets sent in `X-Secrets`: base64 of `{"NAME": {"value": "V"}}` (what the reference
/// client sends; a bare string value is accepted too). The error never repeats the content.
pub(crate) fn header_secrets(headers: &HeaderMap) -> Result<Option<Secrets>, ApiError> {
    let Some(raw) = headers.get(X_SECRETS) else {
        return Ok(None);
    };
    let bad = || {
        ApiError::BadRequest(
            "X-Secrets header must be base64 of a JSON object {\"NAME\": {\"value\": \"...\"}}"
                .to_owned(),
        )
    };
    let text = raw.to_str().map_err(|_| bad())?.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(text)
        .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(text))
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(text))
        .map_err(|_| bad())?;
    let map: Map<String, Value> = serde_json::from_slice(&decoded).map_err(|_| bad())?;
    let mut secrets = Secrets::default();
    for (name, v) in map {
        let value = match v {
            Value::String(s) => s,
            Value::Object(mut o) => match o.remove("value") {
                Some(Value::String(s)) => s,
                _ => return Err(bad()),
            },
            _ => return Err(bad()),
        };
        secrets.insert(name, value);
    }
    Ok(Some(secrets))
}

/// Whether the request carries the API key in `X-API-Key` or `Authorization: Bearer`
/// (PROTOCOL_NOTES row `api-key`), compared in constant time.
pub(crate) fn authorized(headers: &HeaderMap, key: &str) -> bool {
    let key = key.as_bytes();
    if let Some(v) = headers.get(X_API_KEY) {
        if constant_time_eq(v.as_bytes(), key) {
            return true;
        }
    }
    if let Some(v) = headers.get(AUTHORIZATION) {
        let v = v.as_bytes();
        if v.len() > 7 && v[..7].eq_ignore_ascii_case(b"bearer ") {
            let token = v[7..].trim_ascii();
            return constant_time_eq(token, key);
        }
    }
    false
}

/// Equality whose time depends only on the lengths, not on where the bytes differ.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether the client asked for `text/event-stream` (content negotiation of
/// `create_session`, PROTOCOL_NOTES row `create-session-reply`).
pub(crate) fn wants_sse(headers: &HeaderMap) -> bool {
    headers.get_all(ACCEPT).iter().any(|v| {
        v.as_bytes()
            .windows(17)
            .any(|w| w.eq_ignore_ascii_case(b"text/event-stream"))
    })
}

/// The JSON type a body field must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Str,
    Int,
    Object,
    /// An object whose values are strings.
    StrMap,
}

impl Kind {
    fn accepts(self, v: &Value) -> bool {
        match self {
            Kind::Str => v.is_string(),
            Kind::Int => v.is_i64(),
            Kind::Object => v.is_object(),
            Kind::StrMap => v
                .as_object()
                .is_some_and(|o| o.values().all(Value::is_string)),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Str => "a string",
            Kind::Int => "an integer",
            Kind::Object => "a JSON object",
            Kind::StrMap => "an object of string values",
        }
    }
}

/// One field of a request body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) required: bool,
}

pub(crate) const fn req(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        required: true,
    }
}

pub(crate) const fn opt(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        required: false,
    }
}

/// Fields of the `tasks` and `num_tasks` bodies.
pub(crate) const SPLIT_BODY: &[Field] = &[req("split", Kind::Str)];
/// Fields of the `task` body.
pub(crate) const TASK_BODY: &[Field] = &[req("split", Kind::Str), req("index", Kind::Int)];
/// Fields of the `task_range` body.
pub(crate) const RANGE_BODY: &[Field] = &[
    req("split", Kind::Str),
    opt("start", Kind::Int),
    opt("stop", Kind::Int),
];
/// Fields of the `create` body.
pub(crate) const CREATE_BODY: &[Field] = &[
    opt("env_name", Kind::Str),
    opt("task_spec", Kind::Object),
    opt("split", Kind::Str),
    opt("index", Kind::Int),
    opt("secrets", Kind::StrMap),
];
/// Fields of the `call` body.
pub(crate) const CALL_BODY: &[Field] = &[
    req("name", Kind::Str),
    opt("input", Kind::Object),
    opt("task_id", Kind::Str),
];

/// Parse a body as a JSON object and check it against `fields`: unknown fields, missing
/// required fields and wrong types are 400s naming the field. `null` counts as absent for an
/// optional field and is removed. An empty body is an empty object.
pub(crate) fn check_body(body: &Bytes, fields: &[Field]) -> Result<Map<String, Value>, ApiError> {
    let mut map = if body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(map)) => map,
            Ok(_) => {
                return Err(ApiError::BadRequest(
                    "request body must be a JSON object".to_owned(),
                ))
            }
            Err(e) => {
                return Err(ApiError::BadRequest(format!(
                    "request body is not valid JSON: {e}"
                )))
            }
        }
    };
    if let Some(unknown) = map.keys().find(|k| !fields.iter().any(|f| f.name == *k)) {
        let expected: Vec<&str> = fields.iter().map(|f| f.name).collect();
        return Err(ApiError::BadRequest(format!(
            "unknown field '{unknown}' in request body; expected {}",
            expected.join(", ")
        )));
    }
    for f in fields {
        match map.get(f.name) {
            None | Some(Value::Null) if f.required => {
                return Err(ApiError::BadRequest(format!(
                    "missing field '{}' ({})",
                    f.name,
                    f.kind.describe()
                )))
            }
            None => {}
            Some(Value::Null) => {
                map.remove(f.name);
            }
            Some(v) if !f.kind.accepts(v) => {
                return Err(ApiError::BadRequest(format!(
                    "field '{}' must be {}",
                    f.name,
                    f.kind.describe()
                )))
            }
            Some(_) => {}
        }
    }
    Ok(map)
}

/// What a `call` body says.
#[derive(Debug)]
pub(crate) struct CallBody {
    pub(crate) name: String,
    /// The tool input; an empty object when absent.
    pub(crate) input: Value,
    pub(crate) task_id: Option<String>,
}

/// The well-formed shape of a `call` body, read in one pass from the bytes.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CallWire {
    name: String,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    task_id: Option<String>,
}

/// Parse a `call` body. Every call goes through here, so a valid body is deserialized
/// straight from the bytes; anything else is re-read by [`check_body`], whose 400s name the
/// field.
pub(crate) fn call_body(body: &Bytes) -> Result<CallBody, ApiError> {
    // A derived struct would also accept a JSON array of its fields: objects only.
    let is_object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if let Some(wire) = is_object
        .then(|| serde_json::from_slice::<CallWire>(body).ok())
        .flatten()
    {
        match wire.input {
            None => {
                return Ok(CallBody {
                    name: wire.name,
                    input: Value::Object(Map::new()),
                    task_id: wire.task_id,
                })
            }
            Some(input @ Value::Object(_)) => {
                return Ok(CallBody {
                    name: wire.name,
                    input,
                    task_id: wire.task_id,
                })
            }
            // `null` is absent; other kinds get check_body's message.
            Some(Value::Null) => {
                return Ok(CallBody {
                    name: wire.name,
                    input: Value::Object(Map::new()),
                    task_id: wire.task_id,
                })
            }
            Some(_) => {}
        }
    }
    let mut map = check_body(body, CALL_BODY)?;
    let name = match map.remove("name") {
        Some(Value::String(name)) => name,
        _ => return Err(ApiError::BadRequest("missing field 'name'".to_owned())),
    };
    let input = map
        .remove("input")
        .unwrap_or_else(|| Value::Object(Map::new()));
    let task_id = match map.remove("task_id") {
        Some(Value::String(id)) => Some(id),
        _ => None,
    };
    Ok(CallBody {
        name,
        input,
        task_id,
    })
}

/// [`check_body`], then the typed body.
pub(crate) fn parse_body<T: DeserializeOwned>(
    body: &Bytes,
    fields: &[Field],
) -> Result<T, ApiError> {
    let map = check_body(body, fields)?;
    serde_json::from_value(Value::Object(map))
        .map_err(|e| ApiError::BadRequest(format!("invalid request body: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use ors_core::types::GetTask;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn session_id_is_required_trimmed_and_bounded() {
        assert!(matches!(
            session_id(&headers(&[])),
            Err(ApiError::MissingSessionId)
        ));
        assert!(matches!(
            session_id(&headers(&[("x-session-id", "  ")])),
            Err(ApiError::MissingSessionId)
        ));
        assert_eq!(
            session_id(&headers(&[("x-session-id", " abc ")])).unwrap(),
            "abc"
        );
        let long = "a".repeat(129);
        assert!(matches!(
            session_id(&headers(&[("x-session-id", &long)])),
            Err(ApiError::InvalidSessionId(_))
        ));
        let max = "a".repeat(128);
        assert!(session_id(&headers(&[("x-session-id", &max)])).is_ok());
        assert!(matches!(
            session_id(&headers(&[("x-session-id", "a\tb")])),
            Err(ApiError::InvalidSessionId(_))
        ));
    }

    #[test]
    fn x_secrets_in_the_reference_client_form() {
        let payload = base64::engine::general_purpose::STANDARD
            .encode(r#"{"API_KEY": {"value": "sk-1"}, "B": "plain"}"#);
        let s = header_secrets(&headers(&[("x-secrets", &payload)]))
            .unwrap()
            .unwrap();
        assert_eq!(s.get("API_KEY"), Some("sk-1"));
        assert_eq!(s.get("B"), Some("plain"));
        let err = header_secrets(&headers(&[("x-secrets", "not base64!")])).unwrap_err();
        assert_eq!(err.status(), 400);
        let bad_shape = base64::engine::general_purpose::STANDARD.encode(r#"{"A": 1}"#);
        assert!(header_secrets(&headers(&[("x-secrets", &bad_shape)])).is_err());
        assert!(header_secrets(&headers(&[])).unwrap().is_none());
    }

    #[test]
    fn api_key_in_either_header() {
        assert!(authorized(&headers(&[("x-api-key", "k1")]), "k1"));
        assert!(authorized(
            &headers(&[("authorization", "Bearer k1")]),
            "k1"
        ));
        assert!(authorized(
            &headers(&[("authorization", "bearer k1")]),
            "k1"
        ));
        assert!(!authorized(&headers(&[("x-api-key", "k2")]), "k1"));
        assert!(!authorized(
            &headers(&[("authorization", "Basic k1")]),
            "k1"
        ));
        assert!(!authorized(&headers(&[]), "k1"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(constant_time_eq(b"abc", b"abc"));
    }

    #[test]
    fn accept_negotiation() {
        assert!(wants_sse(&headers(&[("accept", "text/event-stream")])));
        assert!(wants_sse(&headers(&[(
            "accept",
            "application/json, Text/Event-Stream;q=0.5"
        )])));
        assert!(!wants_sse(&headers(&[("accept", "application/json")])));
        assert!(!wants_sse(&headers(&[])));
    }

    #[test]
    fn body_errors_name_the_field() {
        let err = |body: &str, fields| {
            check_body(&Bytes::from(body.to_owned()), fields)
                .unwrap_err()
                .to_string()
        };
        assert!(err(r#"{"split": 1, "index": 0}"#, TASK_BODY).contains("'split'"));
        assert!(err(r#"{"split": "train", "index": "0"}"#, TASK_BODY).contains("'index'"));
        assert!(err(r#"{"split": "train"}"#, TASK_BODY).contains("missing field 'index'"));
        assert!(err(r#"{"split": "train", "index": 0, "x": 1}"#, TASK_BODY)
            .contains("unknown field 'x'"));
        assert!(err("[1]", TASK_BODY).contains("JSON object"));
        assert!(err("{", TASK_BODY).contains("not valid JSON"));
        assert!(err(r#"{"secrets": {"a": 1}}"#, CREATE_BODY).contains("'secrets'"));
        assert!(err(r#"{"split": "train", "index": 1.5}"#, TASK_BODY).contains("'index'"));
    }

    #[test]
    fn call_bodies_parse_in_one_pass_and_errors_name_the_field() {
        let ok = |body: &'static str| call_body(&Bytes::from_static(body.as_bytes())).unwrap();
        let c = ok(r#"{"name":"echo","input":{"text":"hi"}}"#);
        assert_eq!(c.name, "echo");
        assert_eq!(c.input, serde_json::json!({"text": "hi"}));
        assert_eq!(c.task_id, None);
        let c = ok(r#"{"name":"echo","input":null,"task_id":"t1"}"#);
        assert_eq!(c.input, serde_json::json!({}));
        assert_eq!(c.task_id.as_deref(), Some("t1"));
        assert_eq!(ok(r#"{"name":"a","task_id":null}"#).task_id, None);
        let err = |body: &'static str| {
            call_body(&Bytes::from_static(body.as_bytes()))
                .unwrap_err()
                .to_string()
        };
        assert!(err(r#"{"input":{}}"#).contains("missing field 'name'"));
        assert!(err(r#"{"name":null}"#).contains("missing field 'name'"));
        assert!(err(r#"{"name":1}"#).contains("field 'name' must be a string"));
        assert!(err(r#"{"name":"a","input":[1]}"#).contains("field 'input' must be a JSON object"));
        assert!(err(r#"{"name":"a","task_id":5}"#).contains("field 'task_id' must be a string"));
        assert!(err(r#"{"name":"a","x":1}"#).contains("unknown field 'x'"));
        assert!(err("").contains("missing field 'name'"));
        assert!(err("[]").contains("JSON object"));
        assert!(err(r#"["echo", {}]"#).contains("JSON object"));
        assert!(err("{").contains("not valid JSON"));
    }

    #[test]
    fn valid_bodies_parse_and_null_is_absent() {
        let t: GetTask = parse_body(
            &Bytes::from_static(br#"{"split":"a","index":-1}"#),
            TASK_BODY,
        )
        .unwrap();
        assert_eq!(t.index, -1);
        let m = check_body(
            &Bytes::from_static(br#"{"split":"a","start":null}"#),
            RANGE_BODY,
        )
        .unwrap();
        assert!(!m.contains_key("start"));
        assert!(check_body(&Bytes::new(), CREATE_BODY).unwrap().is_empty());
    }
}
