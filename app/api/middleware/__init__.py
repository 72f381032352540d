"""What runs around every request: API keys and tenants, CORS, the body limit, arrival tickets,
the replica header and idempotent writes."""
