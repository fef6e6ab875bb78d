//! Attribute arguments (`#[tool(name = "...", shared = false)]` and friends): one parser for
//! every macro, so unknown keys, repeated keys and bad values read the same everywhere.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{LitBool, LitStr, Member, Path, Token};

/// Every error found while expanding one macro call; reported together at the end so one
/// run of the compiler shows them all.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, err: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(err),
            None => self.0 = Some(err),
        }
    }

    pub(crate) fn at(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.push(syn::Error::new(span, msg));
    }

    pub(crate) fn spanned(&mut self, tokens: impl ToTokens, msg: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens, msg));
    }

    /// `tokens` (what is emitted), followed by the errors.
    pub(crate) fn after(self, tokens: TokenStream) -> TokenStream {
        let errors = self.0.map(|e| e.to_compile_error());
        quote::quote!(#tokens #errors)
    }
}

/// A key a macro accepts, with how it is written (for the "valid keys are" list).
pub(crate) struct Key {
    pub(crate) name: &'static str,
    pub(crate) usage: &'static str,
}

impl Key {
    /// A key written `usage` (`name = "..."`).
    pub(crate) const fn new(name: &'static str, usage: &'static str) -> Self {
        Self { name, usage }
    }

    /// A flag: a key written as its bare name.
    pub(crate) const fn flag(name: &'static str) -> Self {
        Self::new(name, name)
    }
}

/// Parse `key = value, key(...)` arguments: `on_key` reads the value of each known key;
/// unknown and repeated keys are recorded (with a "did you mean" when a key is close) and
/// parsing goes on, so every mistake in the attribute is reported at once.
pub(crate) fn parse_args(
    tokens: TokenStream,
    macro_name: &str,
    keys: &[Key],
    errors: &mut Errors,
    mut on_key: impl FnMut(&str, &ParseNestedMeta) -> syn::Result<()>,
) {
    let mut seen: Vec<&'static str> = Vec::new();
    let parser = syn::meta::parser(|meta| {
        let key_name = meta.path.to_token_stream().to_string().replace(' ', "");
        let Some(key) = keys.iter().find(|k| k.name == key_name) else {
            errors.spanned(&meta.path, unknown_key(macro_name, &key_name, keys));
            return skip_value(&meta);
        };
        if seen.contains(&key.name) {
            errors.spanned(
                &meta.path,
                format!("`{}` is given twice in {macro_name}", key.name),
            );
        }
        seen.push(key.name);
        on_key(key.name, &meta)
    });
    if let Err(e) = parser.parse2(tokens) {
        errors.push(e);
    }
}

fn unknown_key(macro_name: &str, key: &str, keys: &[Key]) -> String {
    let valid = keys
        .iter()
        .map(|k| format!("`{}`", k.usage))
        .collect::<Vec<_>>()
        .join(", ");
    let close = keys
        .iter()
        .map(|k| (edit_distance(key, k.name), k.name))
        .filter(|(d, _)| *d <= 2)
        .min();
    let hint = close.map_or_else(String::new, |(_, name)| format!("; did you mean `{name}`?"));
    format!("unknown {macro_name} argument `{key}`{hint} (valid arguments: {valid})")
}

/// Consume the value of an unknown key so parsing can go on to the next one.
fn skip_value(meta: &ParseNestedMeta) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.input.parse::<Token![=]>()?;
        meta.input.parse::<syn::Expr>()?;
    } else if !meta.input.is_empty() && !meta.input.peek(Token![,]) {
        meta.input.parse::<TokenTree>()?;
    }
    Ok(())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// `key = value`; a value that is not a `T` is the error `expected`, on the value.
fn value_of<T: syn::parse::Parse>(meta: &ParseNestedMeta, expected: String) -> syn::Result<T> {
    meta.value()?
        .parse()
        .map_err(|e| syn::Error::new(e.span(), expected))
}

/// `key = "..."`.
pub(crate) fn lit_str(meta: &ParseNestedMeta, key: &str) -> syn::Result<LitStr> {
    value_of(meta, format!("expected a string: `{key} = \"...\"`"))
}

/// `key = true` or `key = false`.
pub(crate) fn lit_bool(meta: &ParseNestedMeta, key: &str) -> syn::Result<LitBool> {
    value_of(meta, format!("expected `{key} = true` or `{key} = false`"))
}

/// A flag: `key` alone, or `key = true` / `key = false`.
pub(crate) fn flag(meta: &ParseNestedMeta, key: &str) -> syn::Result<bool> {
    Ok(!meta.input.peek(Token![=]) || lit_bool(meta, key)?.value)
}

/// `key = path::to::item`.
pub(crate) fn path_value(meta: &ParseNestedMeta, key: &str) -> syn::Result<Path> {
    value_of(
        meta,
        format!("expected a path to a function: `{key} = path::to::function`"),
    )
}

/// `crate = ::path` (or `crate = "::path"`, as serde spells it).
pub(crate) fn crate_path(meta: &ParseNestedMeta) -> syn::Result<Path> {
    let value = meta.value()?;
    if value.peek(LitStr) {
        value.parse::<LitStr>()?.parse()
    } else {
        Path::parse_mod_style(value)
    }
}

/// `toolsets(field, other_field, 0)`.
pub(crate) fn members(meta: &ParseNestedMeta) -> syn::Result<Punctuated<Member, Token![,]>> {
    let content;
    syn::parenthesized!(content in meta.input);
    Punctuated::parse_terminated(&content)
}

pub(crate) const CRATE_KEY: Key = Key::new("crate", "crate = ::path::to::ors_server");

/// The path generated code names the SDK by (`::ors_server` unless `crate = ...`).
pub(crate) fn default_crate() -> Path {
    syn::parse_quote!(::ors_server)
}

/// The arguments of a macro whose only key is `crate = ...`: the SDK's path.
pub(crate) fn crate_only(attr: TokenStream, macro_name: &str, errors: &mut Errors) -> Path {
    let mut krate = default_crate();
    parse_args(attr, macro_name, &[CRATE_KEY], errors, |_, meta| {
        krate = crate_path(meta)?;
        Ok(())
    });
    krate
}

/// Whether `name` is a valid tool or environment name: `[A-Za-z0-9_-]{1,64}`.
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("sharde", "shared"), 2);
        assert_eq!(edit_distance("nme", "name"), 1);
        assert_eq!(edit_distance("description", "description"), 0);
        assert_eq!(edit_distance("x", "shared"), 6);
    }

    #[test]
    fn names_follow_the_tool_name_rule() {
        assert!(valid_name("submit"));
        assert!(valid_name("get-weather_2"));
        assert!(!valid_name(""));
        assert!(!valid_name("has space"));
        assert!(!valid_name("café"));
        assert!(valid_name(&"a".repeat(64)));
        assert!(!valid_name(&"a".repeat(65)));
    }
}
