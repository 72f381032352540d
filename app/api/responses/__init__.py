"""OpenAI's Responses API (/v1/responses): schemas, replies and the routes."""
