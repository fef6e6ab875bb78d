//! [`CallInput`]: a tool call's input as it arrived, kept as JSON text until the tool's typed
//! input is deserialized from it. A `serde_json::Value` of a large input costs many times its
//! text (a 10 MiB body of `[0],` took ~580 MB as a `Value`); deserializing the tool's own type
//! from the text builds only what the tool reads.

use std::fmt;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::Value;

use ors_core::types::json_error_text;

/// The input of one tool call: a JSON object, or nothing (which tools read as `{}`).
///
/// ```
/// use ors_runtime::env::CallInput;
/// use serde_json::json;
///
/// #[derive(serde::Deserialize)]
/// struct Add { a: i64, b: i64 }
///
/// let input = CallInput::from_json_text(r#"{"a": 1, "b": 2, "note": [0, 0]}"#.into());
/// let add: Add = input.deserialize().unwrap();
/// assert_eq!(add.a + add.b, 3);
/// assert_eq!(CallInput::from(json!({"a": 1})).to_value().unwrap(), json!({"a": 1}));
/// ```
#[derive(Clone, Default)]
pub struct CallInput(Repr);

#[derive(Clone, Default)]
enum Repr {
    /// No input (absent or `null`).
    #[default]
    Empty,
    /// JSON text, as received.
    Text(Bytes),
    /// An input already built as a value (a direct call, or a caller that edited it).
    Value(Value),
}

/// Why a [`CallInput`] could not become the tool's input type: the field (`.` for the input
/// itself) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", field_prefix(.field))]
pub struct InputError {
    /// The path of the field that does not fit (`.` for the input as a whole).
    pub field: String,
    /// What serde said, without a text position (the field says where).
    pub message: String,
}

fn field_prefix(field: &str) -> String {
    if field == "." {
        String::new()
    } else {
        format!("field '{field}': ")
    }
}

impl CallInput {
    /// No input; tools read it as `{}`.
    pub fn empty() -> Self {
        CallInput(Repr::Empty)
    }

    /// An input given as JSON text (a server hands over the slice of the request body it
    /// parsed, so nothing is copied). Text that is not valid JSON fails when it is read.
    pub fn from_json_text(text: Bytes) -> Self {
        CallInput(Repr::Text(text))
    }

    /// Whether there is no input at all.
    pub fn is_empty(&self) -> bool {
        matches!(self.0, Repr::Empty | Repr::Value(Value::Null))
    }

    /// The tool's input type, deserialized straight from the text; an error names the field
    /// that does not fit.
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T, InputError> {
        match &self.0 {
            Repr::Empty | Repr::Value(Value::Null) => from_text(b"{}"),
            Repr::Text(text) => from_text(text),
            // As for text, the path is tracked only to name the field of an input that fails.
            Repr::Value(value) => T::deserialize(value)
                .or_else(|_| serde_path_to_error::deserialize(value).map_err(input_error)),
        }
    }

    /// The input as a JSON value (built now when it is text); `{}` when there is none.
    pub fn to_value(&self) -> Result<Value, InputError> {
        self.clone().into_value()
    }

    /// The input as a JSON value, consuming it (no copy when it already is one); `{}` when
    /// there is none.
    pub fn into_value(self) -> Result<Value, InputError> {
        match self.0 {
            Repr::Empty | Repr::Value(Value::Null) => Ok(Value::Object(Default::default())),
            Repr::Value(value) => Ok(value),
            Repr::Text(text) => from_text(&text),
        }
    }

    /// What kind of JSON the input is, as error messages say it ("an object", "an array");
    /// text is not parsed for this, only its first character looked at.
    pub fn kind(&self) -> &'static str {
        match &self.0 {
            Repr::Empty => "null",
            Repr::Value(value) => ors_core::types::json_kind(value),
            Repr::Text(text) => match text.iter().find(|b| !b.is_ascii_whitespace()) {
                Some(b'{') => "an object",
                Some(b'[') => "an array",
                Some(b'"') => "a string",
                Some(b't' | b'f') => "a boolean",
                Some(b'n') => "null",
                Some(_) => "a number",
                None => "nothing",
            },
        }
    }
}

impl From<Value> for CallInput {
    fn from(value: Value) -> Self {
        CallInput(Repr::Value(value))
    }
}

impl fmt::Debug for CallInput {
    // Inputs can be large and may hold what users typed: their size and kind, not content.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let len = match &self.0 {
            Repr::Text(text) => text.len(),
            _ => 0,
        };
        f.debug_struct("CallInput")
            .field("kind", &self.kind())
            .field("text_bytes", &len)
            .finish()
    }
}

fn from_text<T: DeserializeOwned>(text: &[u8]) -> Result<T, InputError> {
    // Most inputs fit: read once, plainly. Tracking the path costs as much again as the
    // read, so only an input that fails is read a second time, to name the field. UTF-8 is
    // checked once, up front, not string by string as a read from bytes does.
    if let Ok(Ok(value)) = std::str::from_utf8(text).map(serde_json::from_str) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(input_error)?;
    de.end().map_err(|e| InputError {
        field: ".".to_owned(),
        message: json_error_text(&e),
    })?;
    Ok(value)
}

fn input_error(e: serde_path_to_error::Error<serde_json::Error>) -> InputError {
    InputError {
        field: e.path().to_string(),
        message: json_error_text(e.inner()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Point {
        x: i32,
        y: i32,
    }

    #[test]
    fn text_and_value_read_the_same_and_name_the_same_field() {
        let text = CallInput::from_json_text(Bytes::from_static(br#"{"x": 1, "y": "2"}"#));
        let value = CallInput::from(json!({"x": 1, "y": "2"}));
        let (a, b) = (
            text.deserialize::<Point>().unwrap_err(),
            value.deserialize::<Point>().unwrap_err(),
        );
        assert_eq!(a, b);
        assert_eq!(
            a.to_string(),
            "field 'y': invalid type: string \"2\", expected i32"
        );
        let ok = CallInput::from_json_text(Bytes::from_static(br#"{"y": 2, "x": 1, "z": [[0]]}"#));
        assert_eq!(ok.deserialize::<Point>().unwrap(), Point { x: 1, y: 2 });
    }

    #[test]
    fn no_input_reads_as_an_empty_object() {
        #[derive(serde::Deserialize)]
        struct Nothing {}
        for input in [CallInput::empty(), CallInput::from(Value::Null)] {
            assert!(input.is_empty());
            assert!(input.deserialize::<Nothing>().is_ok());
            let missing = input.deserialize::<Point>().unwrap_err();
            assert_eq!(missing.to_string(), "missing field 'x'");
        }
        assert_eq!(CallInput::empty().to_value().unwrap(), json!({}));
    }

    #[test]
    fn kinds_without_parsing_and_bad_text_is_an_error_not_a_panic() {
        let text = |t: &'static str| CallInput::from_json_text(Bytes::from_static(t.as_bytes()));
        assert_eq!(text(" {}").kind(), "an object");
        assert_eq!(text("[1]").kind(), "an array");
        assert_eq!(text("3").kind(), "a number");
        assert!(text("{").deserialize::<Point>().is_err());
        assert!(text("{} x").to_value().is_err());
        assert_eq!(
            format!("{:?}", text("{}")),
            "CallInput { kind: \"an object\", text_bytes: 2 }"
        );
    }
}
