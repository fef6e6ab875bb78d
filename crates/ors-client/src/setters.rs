//! The builders' setter macro, in a module of its own so the modules using it do not point
//! back at the crate root (an import circle for `cargo xtask circles`).

/// Builder methods that set one field to the value given: a field of `self.cfg` with `[cfg]`,
/// of `self` with `[]`. A `, VAR` after the type names the variable whose bad value the
/// setter replaces (so building no longer reports it). The value is converted into the field's
/// type (`name: impl Into<String>`); `name: Some(T)` sets an `Option` field to `Some` of it.
macro_rules! setters {
    ([$($at:ident)?]) => {};
    ([$($at:ident)?] $(#[$doc:meta])* $name:ident: Some($($ty:tt)+); $($rest:tt)*) => {
        $(#[$doc])*
        #[allow(clippy::useless_conversion)]
        pub fn $name(mut self, value: $($ty)+) -> Self {
            self$(.$at)?.$name = Some(value.into());
            self
        }
        setters!([$($at)?] $($rest)*);
    };
    ([$($at:ident)?] $(#[$doc:meta])* $name:ident: $ty:ty $(, $env:ident)?; $($rest:tt)*) => {
        $(#[$doc])*
        #[allow(clippy::useless_conversion)]
        pub fn $name(mut self, value: $ty) -> Self {
            self$(.$at)?.$name = value.into();
            $(self.overridden($env);)?
            self
        }
        setters!([$($at)?] $($rest)*);
    };
}
