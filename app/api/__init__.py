"""HTTP: routes, request/response schemas, the responder (SSE or JSON), OpenAI-style errors,
upload reading, metrics and the services the routes share. Imports run routes -> chat -> engine."""
