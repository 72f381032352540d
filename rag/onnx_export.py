"""The `onnx-int8` embedding backend's model: exported from the packaged (or given)
sentence-transformers weights with torch, quantized to int8 with ONNX Runtime, cached on disk.

No network and no optimum (optimum-onnx pins transformers < 4.58, which sentence-transformers 6
cannot use): `torch.onnx.export` writes the transformer (token ids -> last hidden states; mean
pooling and normalisation stay in numpy), then `quantize_dynamic` makes the MatMul weights int8
per channel (per-tensor scales cost too much accuracy on this model). `make install` runs
`python -m rag.onnx_export` so a server never waits for it; otherwise the first load does it.

The file lives under `<cache>/<model name>-<digest>/model.int8.onnx`, the digest being of the
weights, the config and EXPORT_VERSION: other weights or another recipe get another file. Two
processes exporting at once serialise on a lock file; the file appears whole (renamed into place).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import sys
import tempfile
from pathlib import Path

from rag.model_files import offline, packaged_model_dir

log = logging.getLogger(__name__)

EXPORT_VERSION = "1"  # bump when the export or quantization recipe changes
FILENAME = "model.int8.onnx"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvchat" / "embedders"


def model_digest(model_dir: Path) -> str:
    h = hashlib.sha256(EXPORT_VERSION.encode())
    for name in ("config.json", "model.safetensors", "pytorch_model.bin"):
        path = model_dir / name
        if path.is_file():
            with path.open("rb") as f:
                for block in iter(lambda f=f: f.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()[:16]


def exported_model(model_dir: str | None = None, root: Path | None = None) -> Path:
    """The int8 ONNX file of this model, exported and quantized first if it is not cached."""
    src = Path(model_dir or packaged_model_dir())
    folder = (root or cache_root()) / f"{src.name if model_dir else 'minilm'}-{model_digest(src)}"
    target = folder / FILENAME
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be exporting it right now
        if not target.is_file():
            log.info("exporting the embedding model to ONNX int8 (once): %s", target)
            _export(src, target)
    return target


def _export(src: Path, target: Path) -> None:
    offline()
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(src), local_files_only=True).eval()

    class Hidden(torch.nn.Module):
        """Token ids -> last hidden states. The attention mask is made here (additive, one
        line) rather than by transformers' mask helpers, whose Python branches on the shapes
        tracing would freeze at the sample's."""

        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001, ANN202
            hidden = self.inner.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
            masked = 1.0 - attention_mask[:, None, None, :].to(hidden.dtype)
            additive = masked * torch.finfo(hidden.dtype).min
            return self.inner.encoder(hidden, attention_mask=additive).last_hidden_state

    sample = torch.ones((2, 8), dtype=torch.int64)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        fp32 = Path(tmp) / "model.onnx"
        int8 = Path(tmp) / FILENAME
        with torch.no_grad():
            torch.onnx.export(
                Hidden().eval(),  # a new module trains by default: dropout would be exported
                (sample, sample, torch.zeros_like(sample)),
                str(fp32),
                input_names=list(INPUTS),
                output_names=["hidden"],
                dynamic_axes={k: {0: "batch", 1: "tokens"} for k in (*INPUTS, "hidden")},
                opset_version=17,
                dynamo=False,
            )
        quantize_dynamic(
            str(fp32),
            str(int8),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
        )
        os.replace(int8, target)


def main(argv: list[str] | None = None) -> int:
    """`python -m rag.onnx_export [MODEL_DIR]`: export now (make install runs it)."""
    args = sys.argv[1:] if argv is None else argv
    # This module's progress, not the quantizer's line per tensor (it logs to the root logger).
    logging.basicConfig(level=logging.WARNING)
    log.setLevel(logging.INFO)
    print(exported_model(args[0] if args else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
