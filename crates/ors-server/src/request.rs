//! Reading what a request says: the session id header, the `X-Secrets` header, the API key,
//! content negotiation, and JSON bodies parsed into the `ors-core` request types, with 400s
//! that name the field (PROTOCOL_NOTES row `bad-body-400`).

use base64::Engine as _;
use bytes::Bytes;
use http::header::{HeaderName, ACCEPT, AUTHORIZATION};
use http::HeaderMap;
use ors_core::protocol::{self, MAX_SESSION_ID_LEN};
use ors_core::types::Secrets;
use ors_runtime::env::CallInput;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::ApiError;

// Named once: looking a header up by `&str` parses and hashes the name on every request.
const X_SESSION_ID: HeaderName = HeaderName::from_static(protocol::HEADER_SESSION_ID);
const X_SECRETS: HeaderName = HeaderName::from_static(protocol::HEADER_SECRETS);
const X_API_KEY: HeaderName = HeaderName::from_static(protocol::HEADER_API_KEY);

/// The value of a header that must be sent at most once: two could be read differently by a
/// proxy and by this server, so a repeated one is refused naming it.
fn once<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
) -> Result<Option<&'a http::HeaderValue>, ApiError> {
    let mut all = headers.get_all(name).iter();
    let first = all.next();
    if all.next().is_some() {
        return Err(ApiError::BadRequest(format!(
            "the {} header is sent more than once; send it once",
            name.as_str()
        )));
    }
    Ok(first)
}

/// The trimmed `X-Session-ID`: required, once, at most [`MAX_SESSION_ID_LEN`] printable
/// bytes.
pub(crate) fn session_id(headers: &HeaderMap) -> Result<&str, ApiError> {
    let raw = once(headers, &X_SESSION_ID)?.ok_or(ApiError::MissingSessionId)?;
    // Every id this server issues, and nearly every id sent, is 1 to 128 visible ASCII
    // characters with nothing to trim: one pass with no early exit (the compiler runs it a
    // vector at a time) finds those, which need no trimming and no search for a tab.
    // Anything else takes the checks below, which say what is wrong.
    let bytes = raw.as_bytes();
    let visible = bytes
        .iter()
        .fold(true, |all, b| all & b.wrapping_sub(0x21).lt(&0x5e));
    if visible && !bytes.is_empty() && bytes.len() <= MAX_SESSION_ID_LEN {
        if let Ok(sid) = raw.to_str() {
            return Ok(sid);
        }
    }
    let sid = raw
        .to_str()
        .map_err(|_| ApiError::InvalidSessionId("it must be printable ASCII"))?
        .trim();
    if sid.is_empty() {
        return Err(ApiError::MissingSessionId);
    }
    if sid.len() > MAX_SESSION_ID_LEN {
        return Err(ApiError::InvalidSessionId("it is longer than 128 bytes"));
    }
    // `to_str` let through only visible ASCII and tabs: a tab is the one control character
    // left to look for, a byte search rather than a walk through chars.
    if sid.as_bytes().contains(&b'\t') {
        return Err(ApiError::InvalidSessionId("it contains control characters"));
    }
    Ok(sid)
}

/// Secrets sent in `X-Secrets`: base64 of `{"NAME": {"value": "V", "allowed_domains": [...]}}`
/// (what the reference clients send; a bare string value is accepted too, and the domains are
/// kept for the environment: PROTOCOL_NOTES row `secrets-forms`). The error never repeats the
/// content.
pub(crate) fn header_secrets(headers: &HeaderMap) -> Result<Option<Secrets>, ApiError> {
    let Some(raw) = once(headers, &X_SECRETS)? else {
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
    let secrets: Secrets = serde_json::from_slice(&decoded).map_err(|_| bad())?;
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
            return constant_time_eq(v[7..].trim_ascii(), key);
        }
    }
    false
}

/// Equality whose time depends only on the lengths, not on where the bytes differ.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether the client asked for `text/event-stream` (content negotiation of
/// `create_session`, PROTOCOL_NOTES row `create-session-reply`).
pub(crate) fn wants_sse(headers: &HeaderMap) -> bool {
    headers.get_all(ACCEPT).iter().any(|v| {
        v.as_bytes()
            .windows(17)
            .any(|w| w.eq_ignore_ascii_case(protocol::EVENT_STREAM.as_bytes()))
    })
}

/// Parse a JSON request body into its `ors-core` type. Unknown fields are ignored (row
/// `unknown-fields-ignored`); a missing or wrong field is a 400 naming it (row
/// `bad-body-400`); `null` is an absent optional field; an empty body is an empty object
/// where nothing is required, and otherwise a 400 saying it is empty and what it should hold.
pub(crate) fn parse_body<'de, T: Deserialize<'de>>(body: &'de [u8]) -> Result<T, ApiError> {
    let json: &'de [u8] = match body.iter().find(|b| !b.is_ascii_whitespace()) {
        None => {
            return serde_json::from_slice(b"{}").map_err(|e| {
                let message = ors_core::types::json_error_text(&e);
                ApiError::BadRequest(match message.strip_prefix("missing field ") {
                    Some(field) => {
                        format!("the request body is empty; expected a JSON object with {field}")
                    }
                    None => {
                        format!("the request body is empty; expected a JSON object ({message})")
                    }
                })
            })
        }
        // A derived struct would also read a JSON array of its fields: objects only.
        Some(b'{') => body,
        Some(_) => {
            return Err(ApiError::BadRequest(
                match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                    Ok(_) => "request body must be a JSON object".to_owned(),
                    Err(e) => format!("request body is not valid JSON: {e}"),
                },
            ))
        }
    };
    // Most bodies are fine: parsed once, plainly. Tracking the path costs as much again as
    // the parse (a call's body: 3,700 instructions of 4,600), so only a body that fails is
    // parsed a second time, to say which field was wrong. UTF-8 is checked once, up front:
    // read from bytes, serde_json checks each string on its own (five calls a call body).
    if let Ok(Ok(value)) = std::str::from_utf8(json).map(serde_json::from_str) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(json);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if !inner.is_data() {
            return ApiError::BadRequest(format!("request body is not valid JSON: {inner}"));
        }
        let message = ors_core::types::json_error_text(&inner);
        ApiError::BadRequest(if path == "." {
            format!("invalid request body: {message}")
        } else {
            format!("invalid field '{path}': {message}")
        })
    })?;
    de.end()
        .map_err(|e| ApiError::BadRequest(format!("request body is not valid JSON: {e}")))?;
    Ok(value)
}

/// A call body (`ors_core::types::ToolCall` on the wire) as the server reads it: the input
/// stays JSON text, a slice of the body, until the tool deserializes its own input type from
/// it (never a `serde_json::Value` of the whole input).
pub(crate) struct CallBody {
    pub(crate) name: String,
    pub(crate) input: CallInput,
    pub(crate) task_id: Option<String>,
}

/// The fields of a call body, the input borrowed as raw JSON.
#[derive(Deserialize)]
struct RawCall<'a> {
    name: String,
    #[serde(default, borrow)]
    input: Option<&'a RawValue>,
    #[serde(default)]
    task_id: Option<String>,
}

/// Parse a call body. The input must be a JSON object or absent (`null` is absent); anything
/// else is a 400 naming the field, as for [`ors_core::types::ToolCall`].
pub(crate) fn parse_call(body: &Bytes) -> Result<CallBody, ApiError> {
    let raw: RawCall<'_> = parse_body(body)?;
    let input = match raw.input {
        None => CallInput::empty(),
        Some(text) => {
            let input = CallInput::from_json_text(subslice(body, text.get().as_bytes()));
            match input.kind() {
                "an object" => input,
                // `null` never gets here (it reads as absent), but means the same.
                "null" => CallInput::empty(),
                kind => {
                    return Err(ApiError::BadRequest(format!(
                        "invalid field 'input': invalid type: {kind}, expected a JSON object"
                    )))
                }
            }
        }
    };
    Ok(CallBody {
        name: raw.name,
        input,
        task_id: raw.task_id,
    })
}

/// `part` of `whole` as a `Bytes` sharing its buffer; a copy if `part` lies elsewhere (it never
/// does: serde_json borrows raw values from its input).
fn subslice(whole: &Bytes, part: &[u8]) -> Bytes {
    let start = (part.as_ptr() as usize).wrapping_sub(whole.as_ptr() as usize);
    if start <= whole.len() && part.len() <= whole.len() - start {
        whole.slice(start..start + part.len())
    } else {
        Bytes::copy_from_slice(part)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use ors_core::types::{CreateSession, GetTask, GetTaskRange, ToolCall};

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
        let twice = headers(&[("x-session-id", "a"), ("x-session-id", "b")]);
        assert_eq!(session_id(&twice).unwrap_err().status(), 400);
        assert!(matches!(
            session_id(&headers(&[("x-session-id", "a\tb")])),
            Err(ApiError::InvalidSessionId(_))
        ));
        // The ends of the visible range, an inner space, and what is not ASCII.
        let sid = "!~".repeat(64);
        assert_eq!(
            session_id(&headers(&[("x-session-id", &sid)])).unwrap(),
            sid
        );
        assert_eq!(
            session_id(&headers(&[("x-session-id", "a b")])).unwrap(),
            "a b"
        );
        let mut h = HeaderMap::new();
        h.insert(
            "x-session-id",
            HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
        );
        assert!(matches!(
            session_id(&h),
            Err(ApiError::InvalidSessionId("it must be printable ASCII"))
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
        // The openreward client's form: allowed domains kept, an empty value still a secret.
        let payload = base64::engine::general_purpose::STANDARD
            .encode(r#"{"api_key": {"value": "", "allowed_domains": ["h.example"]}}"#);
        let s = header_secrets(&headers(&[("x-secrets", &payload)]))
            .unwrap()
            .unwrap();
        assert_eq!(s.get("api_key"), Some(""));
        assert_eq!(
            s.allowed_domains("api_key"),
            Some(&["h.example".to_owned()][..])
        );
        let twice = headers(&[("x-secrets", &payload), ("x-secrets", &payload)]);
        let err = header_secrets(&twice).unwrap_err();
        assert_eq!(err.status(), 400);
        assert!(err
            .to_string()
            .contains("x-secrets header is sent more than once"));
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

    fn err<T: serde::de::DeserializeOwned + std::fmt::Debug>(body: &str) -> String {
        let e = parse_body::<T>(body.as_bytes()).unwrap_err();
        assert_eq!(e.status(), 400, "{e}");
        e.to_string()
    }

    #[test]
    fn body_errors_name_the_field() {
        assert_eq!(
            err::<GetTask>(r#"{"split": 1, "index": 0}"#),
            "invalid field 'split': invalid type: integer '1', expected a string"
        );
        assert!(err::<GetTask>(r#"{"split": "train", "index": "0"}"#).contains("'index'"));
        assert!(err::<GetTask>(r#"{"split": "train", "index": 1.5}"#).contains("'index'"));
        assert_eq!(
            err::<GetTask>(r#"{"split": "train"}"#),
            "invalid request body: missing field 'index'"
        );
        assert_eq!(err::<GetTask>("[1]"), "request body must be a JSON object");
        assert!(err::<GetTask>("{").starts_with("request body is not valid JSON"));
        assert!(err::<GetTask>("[").starts_with("request body is not valid JSON"));
        assert!(err::<GetTask>(r#"{"split": "a", "index": 0} x"#)
            .starts_with("request body is not valid JSON"));
        assert!(err::<CreateSession>(r#"{"secrets": {"a": 1}}"#).contains("'secrets.a'"));
    }

    #[test]
    fn unknown_fields_are_ignored_and_a_misspelt_required_field_is_missing() {
        // PROTOCOL_NOTES row `unknown-fields-ignored`.
        let t: GetTask =
            parse_body(br#"{"split": "a", "index": 2, "x": 1, "toolset_name": "t"}"#).unwrap();
        assert_eq!((t.split.as_str(), t.index), ("a", 2));
        assert_eq!(
            err::<GetTask>(r#"{"split": "a", "indx": 2}"#),
            "invalid request body: missing field 'index'"
        );
    }

    #[test]
    fn call_bodies_keep_the_input_as_a_slice_of_the_body() {
        let body = Bytes::from_static(br#"{"name":"echo","input": {"text":"hi"} ,"task_id":"t1"}"#);
        let call = parse_call(&body).unwrap();
        assert_eq!(
            (call.name.as_str(), call.task_id.as_deref()),
            ("echo", Some("t1"))
        );
        assert_eq!(
            call.input.to_value().unwrap(),
            serde_json::json!({"text": "hi"})
        );
        for empty in [r#"{"name":"a"}"#, r#"{"name":"a","input":null}"#] {
            assert!(parse_call(&Bytes::from(empty)).unwrap().input.is_empty());
        }
        for (bad, kind) in [
            ("[1]", "an array"),
            ("\"x\"", "a string"),
            ("3", "a number"),
        ] {
            let body = Bytes::from(format!(r#"{{"name":"a","input":{bad}}}"#));
            let Err(e) = parse_call(&body) else {
                panic!("{bad} is not an input");
            };
            assert_eq!(
                e.to_string(),
                format!("invalid field 'input': invalid type: {kind}, expected a JSON object")
            );
        }
        assert!(parse_call(&Bytes::from_static(br#"{"input":{}}"#)).is_err());
        let whole = Bytes::from_static(b"abcdef");
        let part = subslice(&whole, &whole[2..4]);
        assert_eq!(
            (&part[..], part.as_ptr()),
            (&b"cd"[..], whole[2..].as_ptr())
        );
        assert_eq!(&subslice(&whole, b"zz")[..], b"zz");
    }

    #[test]
    fn call_bodies_and_their_errors() {
        let ok = |body: &str| parse_body::<ToolCall>(body.as_bytes()).unwrap();
        let c = ok(r#"{"name":"echo","input":{"text":"hi"}}"#);
        assert_eq!(c.name, "echo");
        assert_eq!(c.input, serde_json::json!({"text": "hi"}));
        assert_eq!(c.task_id, None);
        let c = ok(r#"{"name":"echo","input":null,"task_id":"t1"}"#);
        assert_eq!(c.input, serde_json::json!({}));
        assert_eq!(c.task_id.as_deref(), Some("t1"));
        assert_eq!(ok(r#"{"name":"a","task_id":null}"#).task_id, None);
        assert_eq!(ok(r#"{"name":"a","x":1}"#).name, "a");
        assert!(err::<ToolCall>(r#"{"input":{}}"#).contains("missing field 'name'"));
        // An empty body is said to be empty, not taken for an object without its fields.
        for empty in ["", "  \n"] {
            assert_eq!(
                err::<ToolCall>(empty),
                "the request body is empty; expected a JSON object with 'name'"
            );
        }
        assert!(err::<ToolCall>(r#"{"name":null}"#).contains("'name'"));
        assert!(err::<ToolCall>(r#"{"name":1}"#).contains("'name'"));
        assert_eq!(
            err::<ToolCall>(r#"{"name":"a","input":[1]}"#),
            "invalid field 'input': invalid type: an array, expected a JSON object"
        );
        assert!(err::<ToolCall>(r#"{"name":"a","task_id":5}"#).contains("'task_id'"));
        assert_eq!(err::<ToolCall>("[]"), "request body must be a JSON object");
        assert_eq!(
            err::<ToolCall>(r#"["echo", {}]"#),
            "request body must be a JSON object"
        );
    }

    #[test]
    fn valid_bodies_parse_and_null_is_absent() {
        let t: GetTask = parse_body(br#"{"split":"a","index":-1}"#).unwrap();
        assert_eq!(t.index, -1);
        let r: GetTaskRange = parse_body(br#"{"split":"a","start":null}"#).unwrap();
        assert_eq!(r.start, None);
        assert_eq!(
            parse_body::<CreateSession>(b"  ").unwrap(),
            CreateSession::default()
        );
    }
}
