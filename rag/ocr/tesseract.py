"""`Tesseract`: one page image -> its text, read by Debian's tesseract-ocr in a child process.

A child process per page keeps OCR's time and memory out of the server: a page that takes
longer than its timeout is killed (the child, not a thread that cannot be stopped), and a
crash of the engine on a hostile image costs that page only. The image goes in on stdin as PGM
(no encoding work), the text comes back on stdout. `OMP_THREAD_LIMIT` bounds its threads.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from PIL import Image

from rag.errors import OcrError

# Tesseract's language codes (eng, deu, chi_sim, ...), several joined by "+".
LANG = re.compile(r"^[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*$")
PROBE_TIMEOUT_S = 10.0
# Page segmentation 3 (automatic: columns, blocks, lines) on a page made level first
# (rag/ocr/deskew.py); Sauvola's local thresholding, not one threshold for the whole page, so
# shadows and uneven light keep their text (bench/ocr_accuracy.py measured both).
ARGS = ("--psm", "3", "-c", "thresholding_method=2")
NICENESS = 10


@dataclass(slots=True, frozen=True)
class TesseractInfo:
    path: str
    version: str
    languages: tuple[str, ...]


def probe(binary: str = "tesseract") -> TesseractInfo:
    """Where tesseract is, its version and installed languages; `OcrError` when it is not
    installed or does not answer."""
    path = shutil.which(binary)
    if path is None:
        raise OcrError(f"{binary} is not installed (Debian: apt-get install tesseract-ocr)")
    try:
        version = _run([path, "--version"], PROBE_TIMEOUT_S).splitlines()[0].strip()
        listed = _run([path, "--list-langs"], PROBE_TIMEOUT_S).splitlines()[1:]
    except (OcrError, IndexError) as e:
        raise OcrError(f"{path} does not answer: {e}") from None
    return TesseractInfo(path, version, tuple(sorted(s.strip() for s in listed if s.strip())))


def _run(args: list[str], timeout: float) -> str:
    try:
        done = subprocess.run(args, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise OcrError(f"no answer within {timeout:g} s") from None
    except OSError as e:
        raise OcrError(str(e)) from None
    if done.returncode != 0:
        raise OcrError(_last_line(done.stderr) or f"exit status {done.returncode}")
    return done.stdout.decode("utf-8", "replace") or done.stderr.decode("utf-8", "replace")


def _last_line(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    return next((line for line in reversed(lines) if line), "")


@dataclass(slots=True, frozen=True)
class Tesseract:
    """`lang`: tesseract's language codes ("eng", "eng+deu"); `threads`: its OpenMP threads."""

    lang: str = "eng"
    threads: int = 1
    binary: str = "tesseract"

    def __post_init__(self) -> None:
        if not LANG.match(self.lang):
            raise ValueError(f"not a tesseract language list: {self.lang!r} (e.g. eng+deu)")

    def read(self, image: Image.Image, timeout: float, dpi: int | None = None) -> str:
        """The page's text, lines as tesseract found them; `OcrError` if it failed or took
        longer than `timeout` seconds (the child is killed). `dpi`: the page's, where known."""
        buffer = io.BytesIO()
        image.convert("L").save(buffer, "PPM")  # greyscale: PGM, read by leptonica as is
        args = [self.binary, "stdin", "stdout", "-l", self.lang, *ARGS]
        if dpi:
            args += ["--dpi", str(dpi)]
        env = {**os.environ, "OMP_THREAD_LIMIT": str(self.threads)}
        try:
            child = subprocess.Popen(
                args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
        except OSError as e:
            raise OcrError(f"tesseract could not run: {e}") from None
        _lower_priority(child.pid)
        try:
            out, err = child.communicate(buffer.getvalue(), timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise OcrError(f"OCR took longer than {timeout:g} s", timed_out=True) from None
        if child.returncode != 0:
            reason = _last_line(err) or f"exit status {child.returncode}"
            raise OcrError(f"tesseract failed: {reason}")
        return out.decode("utf-8", "replace").replace("\f", "").strip()


def _lower_priority(pid: int) -> None:
    """Background work: the scheduler gives the server's own threads the cores first."""
    # Not on this platform, or the child is already gone: it runs as it is.
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, pid, NICENESS)
