"""HTTP: one folder per API, each with its routes (`*_routes.py`), schemas and reply shapes
(openai/, anthropic/, responses/, llama_server/, kvchat/), what runs around every request
(middleware/), the web UI's files (web_ui/), and here what they all share: errors, the responder
(SSE or JSON), a turn's reply, the shared request fields, metrics, lookups and `Services`.
Imports run routes -> chat -> engine."""
