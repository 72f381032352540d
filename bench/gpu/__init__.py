"""The GPU check: kvchat beside llama-server on a GPU machine, prepared here and run there in one
call (docs/benchmarks.md, GPU).

- `kit` (`make gpu-kit`): everything the GPU machine lacks, in one ignored folder under the
  carry limit: the llama.cpp source llama-cpp-python vendors (trimmed), llama-cpp-python's Python
  package without its CPU libraries, the wheels of our dependencies that machine does not have,
  and the packaged models' metadata (tokenizer, architecture) without their weights;
- `random_model`: a GGUF of a model's architecture and tokenizer with random weights, at the
  packaged model's shape or a larger common one (speed does not depend on the values);
- `check`: the benchmark rows, ours then llama-server with the same flags, one table;
- scripts/gpu_check.sh: the one device call that builds llama.cpp, makes the models and runs
  `check`; `make test` rehearses it on the CPU with a tiny model (tests/bench/gpu).
"""
