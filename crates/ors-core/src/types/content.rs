//! Content: text and image blocks (prompts, tool outputs, messages), and the JSON object
//! the protocol uses for metadata.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// A JSON object, the protocol's `JSONObject`.
pub type JsonObject = Map<String, Value>;

/// Text content with optional metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// Optional metadata about this block (`null` on the wire when absent).
    #[serde(default)]
    pub detail: Option<JsonObject>,
}

/// Base64-encoded image content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ImageBlock {
    /// Base64-encoded image bytes.
    pub data: String,
    /// MIME type such as `image/png`.
    #[serde(rename = "mimeType")]
    pub mime_type: String,
    /// Optional metadata about this block.
    #[serde(default)]
    pub detail: Option<JsonObject>,
}

/// One unit of content: text or an image, tagged by `type`.
///
/// Deserializing also accepts a block without `type` (the reference models default it), taking
/// it from the keys present: `text` makes a text block, `data` or `mimeType` an image block.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Block {
    /// A text block (`"type": "text"`).
    Text(TextBlock),
    /// An image block (`"type": "image"`).
    Image(ImageBlock),
}

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut map = JsonObject::deserialize(d)?;
        // `"type": null` reads as no type: the block's keys say which it is.
        let kind = match map.remove("type").filter(|t| !t.is_null()) {
            Some(Value::String(t)) => t,
            None if map.contains_key("text") => "text".to_owned(),
            None if map.contains_key("data") || map.contains_key("mimeType") => "image".to_owned(),
            None => return Err(D::Error::missing_field("type")),
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "block `type` must be a string, got {other}"
                )))
            }
        };
        let body = Value::Object(map);
        let block = match kind.as_str() {
            "text" => TextBlock::deserialize(body).map(Block::Text),
            "image" => ImageBlock::deserialize(body).map(Block::Image),
            _ => return Err(D::Error::unknown_variant(&kind, &["text", "image"])),
        };
        block.map_err(D::Error::custom)
    }
}

/// A list of blocks: prompts and tool outputs.
pub type Blocks = Vec<Block>;

impl Block {
    /// A text block without detail.
    pub fn text(text: impl Into<String>) -> Self {
        Block::Text(TextBlock {
            text: text.into(),
            detail: None,
        })
    }

    /// An image block from base64 data and a MIME type.
    pub fn image(data_base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Block::Image(ImageBlock {
            data: data_base64.into(),
            mime_type: mime_type.into(),
            detail: None,
        })
    }

    /// Attach `detail` metadata to this block.
    pub fn with_detail(mut self, detail: JsonObject) -> Self {
        match &mut self {
            Block::Text(b) => b.detail = Some(detail),
            Block::Image(b) => b.detail = Some(detail),
        }
        self
    }

    /// The text of a text block, `None` for an image.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Block::Text(b) => Some(&b.text),
            Block::Image(_) => None,
        }
    }
}

/// The text of a list of blocks, as a method: `output.text()` on a [`crate::ToolOutput`] (its
/// blocks), `prompt.text()` on [`Blocks`].
///
/// A trait rather than an inherent method because `ToolOutput::text(..)` is already the
/// constructor of a one-block output; `ToolOutput::text("hi")` still builds one, and
/// `out.text()` (with this trait in scope) reads the text back.
///
/// ```
/// use ors_core::{Block, BlockText, ToolOutput};
///
/// let out = ToolOutput::text("Correct!").with_block(Block::image("iVBO", "image/png"));
/// assert_eq!(out.text(), "Correct!");
/// let prompt = vec![Block::text("What is 2+2?"), Block::text("Answer with a number.")];
/// assert_eq!(prompt.text(), "What is 2+2?\nAnswer with a number.");
/// ```
pub trait BlockText {
    /// The text of every text block, in order, joined by line breaks; image blocks are skipped.
    fn text(&self) -> String;
}

impl BlockText for [Block] {
    fn text(&self) -> String {
        let texts: Vec<&str> = self.iter().filter_map(Block::as_text).collect();
        texts.join("\n")
    }
}
