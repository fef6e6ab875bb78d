//! How the server's and the client's settings are declared once: each setting is one row of a
//! [`settings!`](crate::settings!) declaration (field, type, default, [`Kind`], environment
//! variable, doc), from which its struct field, `Default`, `Debug` (secrets redacted), the
//! overlay of `ORS_*` variables, the checks of values set in code and the guides' settings
//! tables follow. A [`Kind`] says how a value is written: the text it reads, which values are
//! valid, how it is shown. An empty variable counts as unset.
//!
//! ```
//! use std::time::Duration;
//! use ors_core::settings::{COUNT, SECS};
//!
//! ors_core::settings! {
//!     /// Settings of a toy.
//!     pub struct Toy {
//!         /// How many.
//!         many: usize = 3, COUNT, env "TOY_MANY";
//!         /// How long.
//!         long: Duration = Duration::from_secs(2), SECS;
//!     }
//! }
//!
//! let mut toy = Toy::default();
//! let errors = toy.overlay(|var| (var == "TOY_MANY").then(|| "seven".to_owned()));
//! assert_eq!(
//!     errors[0].to_string(),
//!     "invalid TOY_MANY: got 'seven', expected a whole number of at least 1"
//! );
//! assert_eq!(Toy::settings()[1].default, "2 s");
//! ```

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// A kibibyte, for byte-count defaults (`64 * KIB`).
pub const KIB: usize = 1 << 10;
/// A mebibyte.
pub const MIB: usize = 1 << 20;
/// A gibibyte.
pub const GIB: usize = 1 << 30;

/// How one kind of setting is written and checked.
pub struct Kind<T> {
    /// What a valid value looks like, for error messages.
    pub expected: &'static str,
    /// The value a variable's text stands for, if any (then checked by `valid`).
    pub read: fn(&str) -> Option<T>,
    /// Whether a value is usable, however it was set.
    pub valid: fn(&T) -> bool,
    /// The value as the docs and `Debug` show it.
    pub show: fn(&T) -> String,
    /// A secret: its value is never shown, not even in an error.
    pub secret: bool,
}

impl<T> Kind<T> {
    /// A kind whose every value read is valid and shown as it is, not a secret.
    pub const fn new(
        expected: &'static str,
        read: fn(&str) -> Option<T>,
        show: fn(&T) -> String,
    ) -> Self {
        Self {
            expected,
            read,
            valid: |_| true,
            show,
            secret: false,
        }
    }

    /// The value of variable `name` whose text is `text`.
    pub fn parse(&self, name: &'static str, text: &str) -> Result<T, Invalid> {
        (self.read)(text.trim())
            .filter(|v| (self.valid)(v))
            .ok_or_else(|| self.invalid(name, text.to_owned()))
    }

    /// Check a value set in code; `name` names its field (and variable).
    pub fn check(&self, name: &'static str, value: &T) -> Result<(), Invalid> {
        (self.valid)(value)
            .then_some(())
            .ok_or_else(|| self.invalid(name, (self.show)(value)))
    }

    fn invalid(&self, name: &'static str, value: String) -> Invalid {
        Invalid {
            name,
            value: if self.secret {
                "<redacted>".into()
            } else {
                value
            },
            expected: self.expected,
        }
    }
}

/// A setting whose value cannot be used: the variable (or field), the value, what would do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {name}: got '{value}', expected {expected}")]
pub struct Invalid {
    /// The variable, or the field (with its variable) for a value set in code.
    pub name: &'static str,
    /// The value given (`<redacted>` for a secret).
    pub value: String,
    /// What a valid value looks like.
    pub expected: &'static str,
}

/// One setting as the docs show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The struct field (and builder method, where there is one).
    pub field: &'static str,
    /// The environment variable that sets it, if any.
    pub var: Option<&'static str>,
    /// The default, as shown.
    pub default: String,
    /// What it does: the field's doc comment, on one line.
    pub doc: String,
}

/// Declare a settings struct, one row a setting:
///
/// ```text
/// /// Doc of the field (becomes its description in the guide's table).
/// field: Type = default expression, KIND, env CONST = "VAR", shown "default as documented";
/// ```
///
/// `env` (with an optional `pub const` naming the variable) and `shown` (for a default that
/// depends on the machine) are optional. It makes the struct with `pub` fields documented
/// with their variable and default, `Default`, a `Debug` that redacts secrets, and
/// `settings()` (every row as a [`Setting`]), `overlay(var)` (set the fields whose variable
/// `var` finds, returning the bad ones) and `check_kinds()` (every field valid for its kind).
#[macro_export]
macro_rules! settings {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $field:ident: $ty:ty = $default:expr, $kind:expr
                $(, env $($const:ident =)? $var:literal)?
                $(, shown $shown:literal)?;
            )*
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $(
                $(#[doc = $doc])*
                #[doc = ""]
                #[doc = concat!(
                    "Default: `", stringify!($default), "`"
                    $(, "; environment variable `", $var, "`")?, "."
                )]
                pub $field: $ty,
            )*
        }

        $($($(
            #[doc = concat!(
                "The environment variable of [`", stringify!($name), "::", stringify!($field), "`]."
            )]
            pub const $const: &str = $var;
        )?)?)*

        impl Default for $name {
            fn default() -> Self {
                Self {
                    $($field: $default,)*
                }
            }
        }

        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($name))
                    $(.field(stringify!($field), &format_args!("{}", ($kind.show)(&self.$field))))*
                    .finish()
            }
        }

        impl $name {
            /// Every setting: its field, environment variable, default and meaning.
            pub fn settings() -> Vec<$crate::settings::Setting> {
                let defaults = Self::default();
                vec![$({
                    let shown: Option<&str> = None $(.or(Some($shown)))?;
                    $crate::settings::Setting {
                        field: stringify!($field),
                        var: None $(.or(Some($var)))?,
                        default: shown.map_or_else(|| ($kind.show)(&defaults.$field), str::to_owned),
                        doc: concat!($($doc),*).split_whitespace().collect::<Vec<_>>().join(" "),
                    }
                },)*]
            }

            /// Set each field whose variable `var` finds (not empty) to its value; the
            /// variables whose values are not valid are left out and returned.
            pub fn overlay(
                &mut self,
                var: impl Fn(&'static str) -> Option<String>,
            ) -> Vec<$crate::settings::Invalid> {
                let mut invalid = Vec::new();
                $($(
                    if let Some(text) = var($var).filter(|t| !t.trim().is_empty()) {
                        match $kind.parse($var, &text) {
                            Ok(value) => self.$field = value,
                            Err(e) => invalid.push(e),
                        }
                    }
                )?)*
                invalid
            }

            /// Check that every field is valid for its kind (values set in code).
            pub fn check_kinds(&self) -> Result<(), $crate::settings::Invalid> {
                $(
                    $kind.check(
                        concat!(stringify!($field) $(, " (", $var, ")")?),
                        &self.$field,
                    )?;
                )*
                Ok(())
            }
        }
    };
}

impl<T: FromStr + ToString> Kind<T> {
    /// A kind read with [`FromStr`] and shown with [`ToString`].
    pub const fn parsed(expected: &'static str) -> Self {
        Self::new(expected, |t| t.parse().ok(), T::to_string)
    }
}

fn secs_of(text: &str) -> Option<Duration> {
    let n: f64 = text.parse().ok()?;
    (n.is_finite() && (0.0..=1e9).contains(&n)).then(|| Duration::from_secs_f64(n))
}

fn show_secs(d: &Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

fn none_or<T>(value: &Option<T>, show: impl Fn(&T) -> String) -> String {
    value.as_ref().map_or_else(|| "none".to_owned(), show)
}

/// The binary units of byte counts, largest first.
const UNITS: [(usize, &str); 3] = [(GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")];

/// A byte count: digits, optionally followed by `KiB`, `MiB` or `GiB` (any case, spaces
/// allowed).
fn bytes_of(text: &str) -> Option<usize> {
    let unit = text.trim_start_matches(|c: char| c.is_ascii_digit());
    let digits = &text[..text.len() - unit.len()];
    let scale = match unit.trim() {
        "" | "b" | "B" => 1,
        unit => UNITS.iter().find(|u| u.1.eq_ignore_ascii_case(unit))?.0,
    };
    digits.parse::<usize>().ok()?.checked_mul(scale)
}

/// A byte count in the largest unit that divides it.
fn show_bytes(n: &usize) -> String {
    match UNITS.iter().find(|&&(u, _)| *n >= u && n % u == 0) {
        Some((u, name)) => format!("{} {name}", n / u),
        None => format!("{n} bytes"),
    }
}

/// Text that is not blank.
pub const TEXT: Kind<String> = Kind {
    valid: |t| !t.trim().is_empty(),
    ..Kind::parsed("some text")
};

/// A secret (an API key): never shown.
pub const SECRET: Kind<Option<String>> = Kind {
    secret: true,
    ..Kind::new(
        "some text",
        |t| Some(Some(t.to_owned())),
        |s| none_or(s, |_| "<redacted>".to_owned()),
    )
};

/// A file's path.
pub const PATH: Kind<Option<PathBuf>> = Kind::new(
    "a file's path",
    |t| Some(Some(PathBuf::from(t))),
    |p| none_or(p, |p| p.display().to_string()),
);

/// `on` or `off` (also `true`/`false`, `yes`/`no`, `1`/`0`).
pub const SWITCH: Kind<bool> = Kind::new(
    "on or off",
    |t| match t.to_ascii_lowercase().as_str() {
        "on" | "1" | "true" | "yes" => Some(true),
        "off" | "0" | "false" | "no" => Some(false),
        _ => None,
    },
    |on| if *on { "on" } else { "off" }.to_owned(),
);

/// Seconds, fractions allowed, 0 included.
pub const SECS: Kind<Duration> = Kind::new("a number of seconds", secs_of, show_secs);

/// Seconds, more than 0.
pub const POSITIVE_SECS: Kind<Duration> = Kind {
    expected: "a number of seconds greater than 0",
    valid: |d| !d.is_zero(),
    ..SECS
};

/// A time limit in seconds (more than 0), or none: `0`, `off` or `none`.
pub const LIMIT_SECS: Kind<Option<Duration>> = Kind {
    valid: |d| d.is_none_or(|d| !d.is_zero()),
    ..Kind::new(
        "a number of seconds, or 0, off or none for no limit",
        |t| match t.to_ascii_lowercase().as_str() {
            "0" | "off" | "none" => Some(None),
            _ => secs_of(t).map(Some),
        },
        |d| none_or(d, show_secs),
    )
};

/// A number of bytes, at least 1, with an optional `KiB`, `MiB` or `GiB` suffix.
pub const BYTES: Kind<usize> = Kind {
    valid: |n| *n > 0,
    ..Kind::new(
        "a number of bytes of at least 1, optionally with a KiB, MiB or GiB suffix",
        bytes_of,
        show_bytes,
    )
};

/// A whole number, at least 1.
pub const COUNT: Kind<usize> = Kind {
    valid: |n| *n > 0,
    ..Kind::parsed("a whole number of at least 1")
};

/// A whole number, 0 included.
pub const NUMBER: Kind<u32> = Kind::parsed("a whole number");

/// A TCP port; 0 picks a free one.
pub const PORT: Kind<u16> = Kind::parsed("a port number (0 to 65535)");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_units_and_show_in_them() {
        let read = |t| BYTES.parse("V", t);
        assert_eq!(read("268435456"), Ok(256 * MIB));
        assert_eq!(read("256MiB"), Ok(256 * MIB));
        assert_eq!(read(" 1 gib "), Ok(GIB));
        assert_eq!(read("4KiB"), Ok(4096));
        for bad in ["4KB", "0", "-1", "99999999999999999999GiB", "lots"] {
            let err = read(bad).unwrap_err();
            assert_eq!(err.value, bad, "KB is ambiguous, 0 is no size");
            assert!(err.to_string().contains("KiB, MiB or GiB"), "{err}");
        }
        assert_eq!(show_bytes(&(64 * MIB)), "64 MiB");
        assert_eq!(show_bytes(&(64 * KIB)), "64 KiB");
        assert_eq!(show_bytes(&1000), "1000 bytes");
    }

    #[test]
    fn limits_are_seconds_or_off() {
        let read = |t| LIMIT_SECS.parse("V", t);
        assert_eq!(read("2.5"), Ok(Some(Duration::from_millis(2500))));
        for off in ["0", "off", "None"] {
            assert_eq!(read(off), Ok(None), "{off}");
        }
        assert!(read("-1").is_err());
        assert!(read("soon").is_err());
        assert!(LIMIT_SECS.check("f", &Some(Duration::ZERO)).is_err());
        assert!(POSITIVE_SECS.parse("V", "0").is_err());
        assert_eq!(SECS.parse("V", "0"), Ok(Duration::ZERO));
    }

    #[test]
    fn a_bad_secret_is_never_shown() {
        let kind = Kind {
            valid: |s: &Option<String>| s.as_ref().is_some_and(|s| s.len() > 3),
            ..SECRET
        };
        let err = kind.parse("KEY", "abc").unwrap_err();
        assert!(!err.to_string().contains("abc"), "{err}");
        assert_eq!((SECRET.show)(&Some("hunter2".into())), "<redacted>");
    }
}
