//! Following redirects: where a `Location` points (RFC 3986 reference resolution), and whether
//! it stays on the same origin (the only redirects the client follows).

use http::Uri;

/// The target of a redirect from `base` to `location` (absolute, scheme-relative,
/// absolute-path or relative-path reference).
pub(super) fn resolve(base: &Uri, location: &str) -> Option<Uri> {
    let location = location.trim();
    if location.is_empty() {
        return None;
    }
    let scheme = base.scheme_str().unwrap_or("http");
    let authority = base.authority()?.as_str();
    let full = if location.contains("://") {
        location.to_owned()
    } else if location.starts_with("//") {
        format!("{scheme}:{location}")
    } else if location.starts_with('/') {
        format!("{scheme}://{authority}{location}")
    } else {
        let dir = base.path().rsplit_once('/').map_or("", |(d, _)| d);
        // The query (with its `?`) is kept as it is; only the path has dot segments.
        let (path, query) = location.split_at(location.find('?').unwrap_or(location.len()));
        let path = without_dots(&format!("{dir}/{path}"));
        format!("{scheme}://{authority}{path}{query}")
    };
    full.parse().ok()
}

/// A path with its `.` and `..` segments resolved (RFC 3986, 5.2.4).
fn without_dots(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    let mut parts = path.split('/').skip(1).peekable();
    while let Some(seg) = parts.next() {
        match seg {
            "." | ".." => {
                if seg == ".." {
                    segments.pop();
                }
                if parts.peek().is_none() {
                    segments.push(""); // `a/..` names the directory: keep its slash
                }
            }
            s => segments.push(s),
        }
    }
    format!("/{}", segments.join("/"))
}

/// Whether two URLs have the same scheme, host and port.
pub(super) fn same_origin(a: &Uri, b: &Uri) -> bool {
    let port = |u: &Uri| {
        u.port_u16().unwrap_or(match u.scheme_str() {
            Some("https") => 443,
            _ => 80,
        })
    };
    a.scheme() == b.scheme()
        && a.host().map(str::to_ascii_lowercase) == b.host().map(str::to_ascii_lowercase)
        && port(a) == port(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_resolve_and_stay_on_their_origin() {
        let base: Uri = "http://h:8080/a/b?x=1".parse().unwrap();
        let at = |l: &str| resolve(&base, l).map(|u| u.to_string());
        assert_eq!(
            at("/gsm8k/tools").as_deref(),
            Some("http://h:8080/gsm8k/tools")
        );
        assert_eq!(at("c").as_deref(), Some("http://h:8080/a/c"));
        assert_eq!(at("../v2/c?q=1").as_deref(), Some("http://h:8080/v2/c?q=1"));
        assert_eq!(at("./c/..").as_deref(), Some("http://h:8080/a/"));
        assert_eq!(at("../../../c").as_deref(), Some("http://h:8080/c"));
        assert_eq!(at("//other/x").as_deref(), Some("http://other/x"));
        assert_eq!(at("http://h:8080/z").as_deref(), Some("http://h:8080/z"));
        assert_eq!(at(""), None);
        let same = |l: &str| same_origin(&base, &resolve(&base, l).unwrap());
        assert!(same("/x") && same("http://H:8080/x"));
        assert!(!same("http://h:8081/x"));
        assert!(!same("http://evil/x"));
        assert!(!same("https://h:8080/x"));
        let plain: Uri = "http://h/".parse().unwrap();
        assert!(same_origin(&plain, &"http://h:80/x".parse().unwrap()));
    }
}
