//! Tool specs in the formats LLM providers expect (OpenAI, Anthropic, Gemini).
