"""Document work in the background: the ingestion worker and its lease, the deletion watch,
the document prefill."""
