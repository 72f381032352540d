"""Benchmarks: each module here runs as `python -m bench.X`; what they share is in bench/lib/,
their workloads in bench/workloads/, the GPU check's kit in bench/gpu/."""
