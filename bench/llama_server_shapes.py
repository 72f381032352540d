"""llama-server's native /completion shapes, recorded from the real binary for the tests.

CI does not build llama-server (`make llama-server` takes ~15 min here), so the conformance test
compares our replies with what this module recorded from the binary the Makefile builds, kept in
tests/app/api/llama_server/llama_server_completion.json. Re-record after changing LLAMA_VERSION:

    make llama-server && python -m bench.llama_server_shapes

`observed()` asks any server the same questions, so ours and llama-server's are read one way.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx

from app.config_derived import packaged_model_path
from bench.lib import peers
from bench.lib.server_process import ROOT

PROMPT = "Hello, my name is"
BODY = {"prompt": PROMPT, "n_predict": 3, "temperature": 0, "n_probs": 2, "return_tokens": True}
STREAM_FLAGS = {"timings_per_token": True, "return_progress": True, "stream": True}
RECORDING = ROOT / "tests" / "app" / "api" / "llama_server" / "llama_server_completion.json"


def observed(base_url: str) -> dict:
    """The keys of a reply, its timings, probabilities, stream chunks and an error; the greedy
    tokens. Lists are sorted so a recording diffs cleanly."""
    reply = httpx.post(base_url + "/completion", json=BODY, timeout=60).json()
    partials, last = stream_keys(base_url, {**BODY, **STREAM_FLAGS})
    error = httpx.post(base_url + "/completion", json={}, timeout=60)
    probs = reply["completion_probabilities"][0]
    return {
        "reply": sorted(reply),
        "timings": sorted(reply["timings"]),
        "probability": sorted(probs),
        "top_logprob": sorted(probs["top_logprobs"][0]),
        "tokens": reply["tokens"],
        "stream_partial": sorted(partials),
        "stream_last": sorted(last),
        "error_status": error.status_code,
        "error": sorted(error.json()["error"]),
    }


def stream_keys(base_url: str, body: dict) -> tuple[set[str], set[str]]:
    """The fields of a stream's partial chunks (all of them) and of its last chunk."""
    with httpx.stream("POST", base_url + "/completion", json=body, timeout=60) as r:
        lines = [line.removeprefix("data: ") for line in r.iter_lines() if line]
    *partials, last = [json.loads(line) for line in lines]  # no `[DONE]`: not JSON
    return set().union(*partials), set(last)


def record(model: str, out: Path = RECORDING) -> dict:
    version = subprocess.run(
        [str(peers.LLAMA_SERVER), "--version"], capture_output=True, text=True, check=True
    )
    with peers.llama_server(model, slots=2) as server:
        shapes = observed(server.base_url)
    lines = (version.stdout + version.stderr).strip().splitlines()
    recording = {"llama_server": lines[0] if lines else "", "model": Path(model).name, **shapes}
    out.write_text(json.dumps(recording, indent=1) + "\n")
    return recording


def main() -> None:
    print(json.dumps(record(packaged_model_path()), indent=1))


if __name__ == "__main__":
    main()
