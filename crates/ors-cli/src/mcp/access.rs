//! Who may talk to `ors mcp --http`: a bearer token every request carries, and the browser
//! origins allowed to send one. Any local process (and, through DNS rebinding, any web page)
//! can reach a loopback port, and an episode holds its secrets, so neither check is optional.

use hyper::header::{AUTHORIZATION, ORIGIN};
use hyper::HeaderMap;

/// The variable holding the bearer token when `--token` is not given.
pub const TOKEN_ENV: &str = "ORS_MCP_TOKEN";

/// Why a request is refused before MCP sees it; its message, sent back, names what to change.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No `Authorization: Bearer` header with the token (401).
    #[error(
        "Unauthorized: send `Authorization: Bearer TOKEN` with the token ors mcp was given \
         (--token or ${}) or printed on stderr at start",
        TOKEN_ENV
    )]
    Unauthorized,
    /// An `Origin` header not in `--allow-origin` (403), with the origin sent.
    #[error(
        "Forbidden: Origin '{}' is not allowed; allow a browser origin with \
         --allow-origin SCHEME://HOST[:PORT]",
        crate::render::truncate(&crate::render::one_line(.0), 200)
    )]
    Origin(String),
}

/// The checks of one `ors mcp --http` process.
#[derive(Debug, Clone)]
pub struct Access {
    token: String,
    origins: Vec<String>,
}

impl Access {
    /// Requests must carry `token`; an `Origin` must be one of `origins` (normalized by
    /// [`normalize_origin`]).
    pub fn new(token: String, origins: Vec<String>) -> Self {
        Self { token, origins }
    }

    /// Whether a request with these headers may reach MCP. The origin is checked first: a
    /// browser's cross-origin request is refused whatever it carries.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        if let Some(origin) = headers.get(ORIGIN) {
            let text = String::from_utf8_lossy(origin.as_bytes()).into_owned();
            let allowed = normalize_origin(&text).is_ok_and(|o| self.origins.contains(&o));
            if !allowed {
                return Err(Refusal::Origin(text));
            }
        }
        let mut auth = headers.get_all(AUTHORIZATION).iter();
        let (Some(value), None) = (auth.next(), auth.next()) else {
            return Err(Refusal::Unauthorized);
        };
        let presented = value
            .to_str()
            .ok()
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        match presented {
            Some(token) if same(token.as_bytes(), self.token.as_bytes()) => Ok(()),
            _ => Err(Refusal::Unauthorized),
        }
    }
}

/// Equal bytes, in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// An origin as browsers send it: `scheme://host[:port]`, lower-cased, without the scheme's
/// default port; `null` stays `null`. Anything else is an error naming the expected form.
pub fn normalize_origin(origin: &str) -> Result<String, String> {
    let origin = origin.trim();
    if origin == "null" {
        return Ok(origin.to_owned());
    }
    let bad = || format!("'{origin}' is not an origin: expected SCHEME://HOST[:PORT]");
    let (scheme, rest) = origin.split_once("://").ok_or_else(bad)?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme.is_empty() || rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        return Err(bad());
    }
    let authority: hyper::http::uri::Authority = rest.parse().map_err(|_| bad())?;
    let host = authority.host().to_ascii_lowercase();
    let default = match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    let port = authority.port_u16().filter(|p| Some(*p) != default);
    let port = port.map(|p| format!(":{p}")).unwrap_or_default();
    Ok(format!("{scheme}://{host}{port}"))
}

/// A fresh token: 32 random bytes, hex.
pub fn generate_token() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for a token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_token_is_required_and_compared_whole() {
        let access = Access::new("s3cret".into(), vec![]);
        assert_eq!(access.check(&headers(&[])), Err(Refusal::Unauthorized));
        let ok = headers(&[("authorization", "Bearer s3cret")]);
        assert_eq!(access.check(&ok), Ok(()));
        assert_eq!(
            access.check(&headers(&[("authorization", "bearer s3cret")])),
            Ok(())
        );
        for wrong in ["Bearer s3cre", "Bearer s3cret2", "Basic s3cret", "s3cret"] {
            assert_eq!(
                access.check(&headers(&[("authorization", wrong)])),
                Err(Refusal::Unauthorized),
                "{wrong}"
            );
        }
        let twice = headers(&[
            ("authorization", "Bearer s3cret"),
            ("authorization", "Bearer other"),
        ]);
        assert_eq!(access.check(&twice), Err(Refusal::Unauthorized));
    }

    #[test]
    fn a_present_origin_must_be_allowed_even_with_the_token() {
        let none = Access::new("t".into(), vec![]);
        let evil = headers(&[
            ("authorization", "Bearer t"),
            ("origin", "http://evil.example"),
        ]);
        assert_eq!(
            none.check(&evil),
            Err(Refusal::Origin("http://evil.example".into()))
        );
        let allowed = Access::new(
            "t".into(),
            vec![normalize_origin("HTTP://App.Example:80").unwrap()],
        );
        let app = headers(&[
            ("authorization", "Bearer t"),
            ("origin", "http://app.example"),
        ]);
        assert_eq!(allowed.check(&app), Ok(()));
        let other_port = headers(&[
            ("authorization", "Bearer t"),
            ("origin", "http://app.example:8080"),
        ]);
        assert!(allowed.check(&other_port).is_err());
    }

    #[test]
    fn origins_are_normalized_or_refused() {
        assert_eq!(
            normalize_origin("https://A.example:443").unwrap(),
            "https://a.example"
        );
        assert_eq!(
            normalize_origin("http://localhost:5173").unwrap(),
            "http://localhost:5173"
        );
        assert_eq!(normalize_origin("null").unwrap(), "null");
        for bad in [
            "app.example",
            "http://",
            "http://a.example/path",
            "http://u@a.example",
        ] {
            assert!(
                normalize_origin(bad).unwrap_err().contains("SCHEME://HOST"),
                "{bad}"
            );
        }
    }

    #[test]
    fn generated_tokens_are_long_and_differ() {
        let (a, b) = (generate_token().unwrap(), generate_token().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
