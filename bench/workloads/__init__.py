"""The benches' workloads: prefix and session scenarios, images, document QA, cluster setups
and workloads, large and quality ingestion sets, hostile requests (the attack tests' too)."""
