//! How the reader writes what it finds: values in messages, and JSON Pointers.

use serde_json::Value;

/// A value as a message shows it: whole when short.
pub(super) fn short(v: &Value) -> String {
    crate::check::truncate(&v.to_string(), 60)
}

/// A `$ref`'s fragment with its `%XX` escapes decoded (`#/$defs/a%20b`).
pub(super) fn percent_decoded(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `f` run with the JSON Pointer `at` extended by one step (a key or an index, escaped); `at`
/// is as it was afterwards.
pub(super) fn below<T>(at: &mut String, step: &str, f: impl FnOnce(&mut String) -> T) -> T {
    let len = at.len();
    at.push('/');
    at.push_str(&step.replace('~', "~0").replace('/', "~1"));
    let out = f(at);
    at.truncate(len);
    out
}
