//! The server's request parsing without a connection: the route table (a path routes the same
//! with a trailing slash, a 405 names a method that routes, an env segment is the path's
//! first), request bodies (parsed exactly as serde would parse a JSON object, refused with a
//! 400 otherwise), and the session-id and secrets headers.
#![no_main]

use http::{HeaderMap, HeaderValue, Method};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use ors_core::types::{CreateSession, GetTask, GetTaskRange, ListTasks, NumTasks, ToolCall};
use ors_server::fuzzing::{self, RouteMatch};
use serde::de::DeserializeOwned;

const METHODS: [&str; 6] = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS"];

fn check_route(method: &Method, path: &str) {
    let got = fuzzing::route(method, path);
    match got {
        RouteMatch::Found { env: Some(env), .. } => {
            let trimmed = path.strip_prefix('/').unwrap_or(path);
            assert!(
                trimmed.starts_with(env) && trimmed[env.len()..].starts_with('/'),
                "{path}"
            );
            assert!(!env.is_empty());
        }
        RouteMatch::Found { env: None, .. } => {
            let trimmed = path.trim_matches('/');
            assert!(!trimmed.contains('/') && !trimmed.is_empty(), "{path}");
        }
        RouteMatch::MethodNotAllowed { allow } => {
            let allowed = Method::from_bytes(allow.as_bytes()).expect("a method");
            assert_ne!(&allowed, method);
            assert!(
                matches!(fuzzing::route(&allowed, path), RouteMatch::Found { .. }),
                "{path}"
            );
        }
        RouteMatch::NotFound => {}
    }
    if !path.ends_with('/') {
        let slashed = format!("{path}/");
        assert_eq!(
            fuzzing::route(method, &slashed),
            got,
            "{path} and {slashed}"
        );
    }
    for other in METHODS {
        let other = Method::from_bytes(other.as_bytes()).expect("a method");
        let r = fuzzing::route(&other, path);
        match (&got, &r) {
            (RouteMatch::NotFound, r) => assert_eq!(r, &RouteMatch::NotFound),
            (_, RouteMatch::NotFound) => panic!("{path} routes for {method} but not for {other}"),
            _ => {}
        }
    }
}

/// `parse_body` accepts exactly the JSON objects serde accepts (an empty body is `{}`), with
/// the same value; anything else is a 400 with a message.
fn check_body<T: DeserializeOwned + PartialEq + std::fmt::Debug>(body: &[u8]) {
    let got = fuzzing::parse_body::<T>(body);
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    let want = match first {
        None => serde_json::from_slice::<T>(b"{}").ok(),
        Some(b'{') => serde_json::from_slice::<T>(body).ok(),
        Some(_) => None,
    };
    match (got, want) {
        (Ok(v), Some(w)) => assert_eq!(v, w),
        (Err((status, msg)), None) => {
            assert_eq!(status, 400, "{msg}");
            assert!(!msg.is_empty());
        }
        (got, want) => panic!("parse_body gave {got:?}, serde {want:?}"),
    }
}

fn check(mut u: Unstructured<'_>) -> Result<()> {
    let u = &mut u;
    match u.int_in_range(0u8..=2)? {
        0 => {
            let method = Method::from_bytes(u.choose(&METHODS)?.as_bytes()).expect("a method");
            let path: String = u.arbitrary()?;
            check_route(&method, &path);
        }
        1 => {
            let body = std::mem::replace(u, Unstructured::new(&[])).take_rest();
            check_body::<ListTasks>(body);
            check_body::<NumTasks>(body);
            check_body::<GetTask>(body);
            check_body::<GetTaskRange>(body);
            check_body::<CreateSession>(body);
            check_body::<ToolCall>(body);
        }
        _ => {
            let sid: Vec<u8> = u.arbitrary()?;
            let secrets: Vec<u8> = if u.arbitrary()? {
                let json: String = u.arbitrary()?;
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, json)
                    .into_bytes()
            } else {
                u.arbitrary()?
            };
            let mut headers = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_bytes(&sid) {
                headers.insert("x-session-id", v);
            }
            if let Ok(v) = HeaderValue::from_bytes(&secrets) {
                headers.insert("x-secrets", v);
            }
            match fuzzing::session_id(&headers) {
                Ok(sid) => {
                    assert!(!sid.is_empty() && sid.len() <= 128, "{sid:?}");
                    assert_eq!(sid.trim(), sid);
                    assert!(!sid.chars().any(char::is_control), "{sid:?}");
                }
                Err((status, _)) => assert_eq!(status, 400),
            }
            if let Err((status, _)) = fuzzing::header_secrets(&headers) {
                assert_eq!(status, 400);
            }
            let _ = fuzzing::wants_sse(&headers);
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = check(Unstructured::new(data));
});
