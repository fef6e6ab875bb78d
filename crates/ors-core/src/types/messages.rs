//! The prompt as a conversation (`GET /{env}/messages`, PROTOCOL_NOTES row `messages-route`)
//! and group scoring (`POST /{env}/score_group`, row `score-group`): the `openreward` SDK's
//! additions.

use serde::{Deserialize, Serialize};

use super::content::{Block, Blocks, ImageBlock, JsonObject, TextBlock};

wire_enum! {
    serde
    /// Who speaks a message.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Role {
        /// Instructions for the model.
        System = "system",
        /// The user (tool results ride in user turns).
        User = "user",
        /// The model (reasoning and tool calls ride in assistant turns).
        Assistant = "assistant",
    }
}

/// A reasoning segment of an assistant turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningBlock {
    /// The reasoning text.
    pub text: String,
    /// A provider's signature over it, passed through (Anthropic replay).
    #[serde(default)]
    pub signature: Option<String>,
    /// Optional metadata.
    #[serde(default)]
    pub detail: Option<JsonObject>,
}

/// A tool call inside an assistant turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallBlock {
    /// The call's id, which its result names.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its input object.
    pub input: JsonObject,
    /// Optional metadata.
    #[serde(default)]
    pub detail: Option<JsonObject>,
}

/// A tool's result inside a user turn, matched to its call by `tool_call_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultBlock {
    /// The id of the call this answers.
    pub tool_call_id: String,
    /// The result's content.
    pub blocks: Blocks,
    /// Whether the call failed.
    #[serde(default)]
    pub is_error: bool,
    /// Optional metadata.
    #[serde(default)]
    pub detail: Option<JsonObject>,
}

/// One block of a message: the prompt's text and image blocks, and the conversation-only
/// reasoning, tool call and tool result blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MessageBlock {
    /// Text.
    Text(TextBlock),
    /// A base64 image.
    Image(ImageBlock),
    /// Reasoning (assistant turns).
    Reasoning(ReasoningBlock),
    /// A tool call (assistant turns).
    ToolCall(ToolCallBlock),
    /// A tool result (user turns).
    ToolResult(ToolResultBlock),
}

impl MessageBlock {
    /// The wire name of this block's type.
    pub fn kind(&self) -> &'static str {
        match self {
            MessageBlock::Text(_) => "text",
            MessageBlock::Image(_) => "image",
            MessageBlock::Reasoning(_) => "reasoning",
            MessageBlock::ToolCall(_) => "tool_call",
            MessageBlock::ToolResult(_) => "tool_result",
        }
    }
}

impl From<Block> for MessageBlock {
    fn from(b: Block) -> Self {
        match b {
            Block::Text(t) => MessageBlock::Text(t),
            Block::Image(i) => MessageBlock::Image(i),
        }
    }
}

/// One turn of a task's conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub blocks: Vec<MessageBlock>,
    /// Optional metadata.
    #[serde(default)]
    pub detail: Option<JsonObject>,
}

impl Message {
    /// A user message holding the prompt's blocks: what `/messages` serves for an environment
    /// that gives only a prompt.
    pub fn user(blocks: Blocks) -> Self {
        Self {
            role: Role::User,
            blocks: blocks.into_iter().map(MessageBlock::from).collect(),
            detail: None,
        }
    }

    /// Whether every block may appear in this role's turns (reasoning and tool calls in the
    /// assistant's, tool results in the user's); the first block that may not, otherwise.
    pub fn misplaced_block(&self) -> Option<&MessageBlock> {
        self.blocks.iter().find(|b| {
            !matches!(
                (self.role, b),
                (_, MessageBlock::Text(_) | MessageBlock::Image(_))
                    | (
                        Role::Assistant,
                        MessageBlock::Reasoning(_) | MessageBlock::ToolCall(_)
                    )
                    | (Role::User, MessageBlock::ToolResult(_))
            )
        })
    }
}

/// One candidate answer of a group to score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupCandidate {
    /// The candidate's transcript.
    pub messages: Vec<Message>,
    /// The trainer's correlation data, echoed untouched.
    #[serde(default)]
    pub metadata: Option<JsonObject>,
}

/// Body of `POST /{env}/score_group`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreGroup {
    /// The candidates, in order.
    pub candidates: Vec<GroupCandidate>,
    /// On a reconnect, the id of the scoring whose result is wanted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

/// The score of one candidate, index-aligned with the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupScore {
    /// The comparative reward.
    pub reward: f64,
    /// Judging detail.
    #[serde(default)]
    pub metadata: Option<JsonObject>,
}

impl From<f64> for GroupScore {
    fn from(reward: f64) -> Self {
        Self {
            reward,
            metadata: None,
        }
    }
}

/// The `end` event's data of a group scoring.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreGroupOutput {
    /// One score per candidate.
    pub scores: Vec<GroupScore>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_the_openreward_wire_form() {
        let m: Message = serde_json::from_str(
            r#"{"role": "assistant", "blocks": [
                {"type": "reasoning", "text": "hmm"},
                {"type": "tool_call", "id": "c1", "name": "submit", "input": {"answer": "4"}},
                {"type": "text", "text": "done", "detail": null}
            ]}"#,
        )
        .unwrap();
        assert_eq!(m.blocks.len(), 3);
        assert_eq!(m.blocks[1].kind(), "tool_call");
        assert!(m.misplaced_block().is_none());
        let user = Message {
            role: Role::User,
            ..m
        };
        assert_eq!(
            user.misplaced_block().map(MessageBlock::kind),
            Some("reasoning")
        );
    }

    #[test]
    fn a_prompt_becomes_one_user_message() {
        let m = Message::user(vec![Block::text("What is 2+2?")]);
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"role": "user", "blocks": [{"type": "text", "text": "What is 2+2?", "detail": null}], "detail": null})
        );
    }
}
