"""OCR accuracy and speed per engine on scanned pages made from real text.

    python -m bench.ocr_accuracy [--pages N] [--engines tesseract,rapidocr] [--out FILE]

The pages (bench/workloads/scanned_pages.py): paragraphs of this repository's docs rendered on
A4 pages with DejaVu fonts, then degraded per condition (a clean 300-dpi render, a 200-dpi
scan, a 150-dpi phone photo, a 100-dpi fax: skew, noise, blur, uneven light, JPEG artifacts).
Each engine reads every page of every condition; the character error rate is the edit
distance between what it read and the text drawn, over the text's length (whitespace runs
counted as one space), the word error rate the same over words. Pages/s: pages read one after
another, the engine's own threads as configured.

Engines: `tesseract` is the server's own reader (the page made level, rag/ocr/deskew.py, then
Debian's tesseract-ocr with the server's arguments, rag/ocr/tesseract.py; one thread, and
`tesseract-2t`: two); `tesseract-defaults` is tesseract as it comes on the page as it is;
`rapidocr` is rapidocr-onnxruntime (PP-OCRv4 models bundled in its wheel, ONNX Runtime on every
core), measured where it is importable (it is not a dependency: `pip install
rapidocr-onnxruntime opencv-python-headless` to compare).
"""

from __future__ import annotations

import argparse
import io
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from bench.workloads.scanned_pages import CONDITIONS, FONTS, Condition, degrade, page_texts, render
from rag.ocr.deskew import deskew
from rag.ocr.tesseract import Tesseract

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "ocr.md"
Reader = Callable[[Image.Image], str]


@dataclass(slots=True)
class Row:
    engine: str
    condition: str
    pages: int
    chars: int
    char_errors: int
    words: int
    word_errors: int
    seconds: float

    @property
    def cer(self) -> float:
        return self.char_errors / self.chars

    @property
    def wer(self) -> float:
        return self.word_errors / self.words


def edit_distance(a: list[int], b: list[int]) -> int:
    """Levenshtein distance, a row at a time in numpy: the insertion term of a row is a
    running minimum (D[j] = min over k <= j of T[k] + j - k)."""
    if not a or not b:
        return max(len(a), len(b))
    bb = np.asarray(b)
    cols = np.arange(len(b) + 1)
    row = cols.copy()
    for i, x in enumerate(a, 1):
        t = np.empty_like(row)
        t[0] = i
        t[1:] = np.minimum(row[1:] + 1, row[:-1] + (bb != x))
        row = np.minimum.accumulate(t - cols) + cols
    return int(row[-1])


def normalized(text: str) -> str:
    return " ".join(text.split())


def errors(reference: str, read: str) -> tuple[int, int, int, int]:
    """(chars, char errors, words, word errors) of `read` against `reference`."""
    ref, got = normalized(reference), normalized(read)
    vocab: dict[str, int] = {}
    ref_words = [vocab.setdefault(w, len(vocab)) for w in ref.split()]
    got_words = [vocab.setdefault(w, len(vocab)) for w in got.split()]
    return (
        len(ref),
        edit_distance([ord(c) for c in ref], [ord(c) for c in got]),
        len(ref_words),
        edit_distance(ref_words, got_words),
    )


def tesseract_reader(threads: int) -> Reader:
    """The server's reader: the page made level, then tesseract with the server's arguments."""
    engine = Tesseract(lang="eng", threads=threads)

    def read(image: Image.Image) -> str:
        return engine.read(deskew(image), timeout=300.0)

    return read


def tesseract_defaults_reader() -> Reader:
    """Tesseract as it comes (page segmentation 3, Otsu's one threshold), the page as it is."""

    def read(image: Image.Image) -> str:
        buffer = io.BytesIO()
        image.convert("L").save(buffer, "PPM")
        env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
        args = ["tesseract", "stdin", "stdout", "-l", "eng"]
        done = subprocess.run(args, input=buffer.getvalue(), capture_output=True, env=env)
        return done.stdout.decode("utf-8", "replace")

    return read


def rapidocr_reader() -> Reader | None:
    try:
        from rapidocr_onnxruntime import RapidOCR
    except ImportError:
        return None
    engine = RapidOCR()

    def read(image: Image.Image) -> str:
        found, _ = engine(np.asarray(image.convert("RGB")))
        return "\n".join(text for _, text, _ in found or [])

    return read


READERS: dict[str, Callable[[], Reader | None]] = {
    "tesseract": lambda: tesseract_reader(1),
    "tesseract-2t": lambda: tesseract_reader(2),
    "tesseract-defaults": tesseract_defaults_reader,
    "rapidocr": rapidocr_reader,
}
DEFAULT_ENGINES = "tesseract,tesseract-defaults,rapidocr"


def pages(n: int, condition: Condition) -> list[tuple[str, Image.Image]]:
    rng = random.Random(f"{condition.name}")
    out = []
    for i, text in enumerate(page_texts(n)):
        font, points = FONTS[i % len(FONTS)], (10.0, 11.0, 12.0)[i % 3]
        clean = render(text, font_name=font, points=points, columns=condition.columns)
        out.append((text, degrade(clean, condition, rng)))
    return out


def measure(name: str, read: Reader, condition: Condition, n: int) -> Row:
    row = Row(name, condition.name, 0, 0, 0, 0, 0, 0.0)
    for text, image in pages(n, condition):
        t0 = time.perf_counter()
        got = read(image)
        row.seconds += time.perf_counter() - t0
        chars, char_errors, words, word_errors = errors(text, got)
        row.pages += 1
        row.chars += chars
        row.char_errors += char_errors
        row.words += words
        row.word_errors += word_errors
    return row


def report(rows: list[Row], n: int, load: float) -> str:
    lines = [
        f"OCR on {n} pages of this repository's docs per condition (bench/ocr_accuracy.py),"
        f" {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores (load average {load:.1f} at the"
        " start); CER and WER: edit distance over the reference's characters and words (lower"
        " is better); pages/s: one page after another.",
        "",
        "| engine | condition | CER | WER | pages/s |",
        "|---|---|---:|---:|---:|",
    ]
    for r in rows:
        speed = r.pages / r.seconds
        lines.append(f"| {r.engine} | {r.condition} | {r.cer:.3f} | {r.wer:.3f} | {speed:.2f} |")
    lines += ["", "| engine | CER, all pages | WER, all pages | pages/s, all pages |"]
    lines.append("|---|---:|---:|---:|")
    for engine in dict.fromkeys(r.engine for r in rows):
        mine = [r for r in rows if r.engine == engine]
        chars, cerr = sum(r.chars for r in mine), sum(r.char_errors for r in mine)
        words, werr = sum(r.words for r in mine), sum(r.word_errors for r in mine)
        speed = sum(r.pages for r in mine) / sum(r.seconds for r in mine)
        lines.append(f"| {engine} | {cerr / chars:.3f} | {werr / words:.3f} | {speed:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=6, help="pages per condition")
    parser.add_argument("--engines", default=DEFAULT_ENGINES, help=", ".join(READERS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows, load = [], os.getloadavg()[0]
    for name in args.engines.split(","):
        read = READERS[name]()
        if read is None:
            print(f"{name}: not installed, skipped", file=sys.stderr)
            continue
        read(Image.new("L", (200, 60), 255))  # the engine's load is not timed
        for condition in CONDITIONS:
            row = measure(name, read, condition, args.pages)
            print(f"{name} {condition.name}: CER {row.cer:.3f} {row.pages / row.seconds:.2f} p/s")
            rows.append(row)
    text = report(rows, args.pages, load)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
