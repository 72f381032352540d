"""Anthropic's Messages API (/v1/messages, count_tokens): schemas, replies and errors."""
