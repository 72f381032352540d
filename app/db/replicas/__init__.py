"""What replicas on one database share: ingestion claims, the deletion log, idempotency keys."""
