"""Loaders: bytes of an uploaded file -> `LoadedDocument` (plain text and where pages start).

Plain text, Markdown (kept as written: it reads well to the model and the splitter knows its
structure), HTML (text only, scripts and styles dropped), PDF (PDFium, one page after another,
page numbers kept), DOCX (as Markdown, rag/docx_loader.py) and source code or any other `text/*`
upload (as plain text). Anything else, or a file that is empty, corrupt or over the byte limit,
raises `DocumentError` saying why; nothing is half-loaded.

What reading may cost beyond the upload's size is bounded by `ParseLimits`: a PDF's pages (its
page count is read before any page), a DOCX's unpacked size (read from the zip's directory
before any part is unpacked: a zip bomb is refused without inflating it) and the time reading
takes, checked between pages and between a DOCX's blocks (a page or block is not interrupted).
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import PurePath
from typing import Any

from rag.docx_loader import docx_text
from rag.errors import DocumentError
from rag.parse_limits import Deadline, ParseLimits

KINDS = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
}
# Source code and other plain-text formats: read as text, whatever their content type says.
TEXT_SUFFIXES = frozenset(
    {
        ".py",
        ".pyi",
        ".js",
        ".mjs",
        ".cjs",
        ".ts",
        ".tsx",
        ".jsx",
        ".java",
        ".kt",
        ".scala",
        ".go",
        ".rs",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".cs",
        ".rb",
        ".php",
        ".swift",
        ".m",
        ".sh",
        ".bash",
        ".zsh",
        ".ps1",
        ".sql",
        ".r",
        ".jl",
        ".lua",
        ".pl",
        ".hs",
        ".ml",
        ".ex",
        ".exs",
        ".erl",
        ".clj",
        ".dart",
        ".vue",
        ".svelte",
        ".css",
        ".scss",
        ".less",
        ".json",
        ".jsonl",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".env",
        ".xml",
        ".csv",
        ".tsv",
        ".rst",
        ".adoc",
        ".tex",
        ".log",
        ".diff",
        ".patch",
        ".proto",
        ".graphql",
        ".cmake",
        ".gradle",
        ".properties",
    }
)
ACCEPTED = ".txt, .md, .html, .pdf, .docx, source code, or any text/* content type"
MIME_KINDS = {
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/html": "html",
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
}
PAGE_BREAK = "\n\n"


@dataclass(slots=True)
class LoadedDocument:
    text: str
    kind: str  # text | markdown | html | pdf | docx
    # Character offset where each page starts (PDF: page i+1 starts at page_starts[i]); empty
    # for formats without pages.
    page_starts: list[int] = field(default_factory=list)

    def page_at(self, offset: int) -> int | None:
        """1-based page holding character `offset`, or None for formats without pages."""
        if not self.page_starts:
            return None
        return max(bisect_right(self.page_starts, offset), 1)


def kind_of(filename: str, content_type: str | None = None) -> str:
    suffix = PurePath(filename).suffix.lower()
    kind = KINDS.get(suffix) or ("text" if suffix in TEXT_SUFFIXES else None)
    mime = (content_type or "").split(";")[0].strip().lower()
    if kind is None and mime:
        kind = MIME_KINDS.get(mime) or ("text" if mime.startswith("text/") else None)
    if kind is None:
        raise DocumentError(f"unsupported file type {filename!r}: send {ACCEPTED}")
    return kind


def load(
    filename: str,
    data: bytes,
    max_bytes: int,
    content_type: str | None = None,
    limits: ParseLimits | None = None,
) -> LoadedDocument:
    """`limits`: pages, unpacked size and time (None: none but `max_bytes`)."""
    limits = limits or ParseLimits()
    deadline = Deadline(limits.timeout)
    kind = kind_of(filename, content_type)
    if len(data) > max_bytes:
        raise DocumentError(
            f"the file has {len(data)} bytes; the limit is {max_bytes} (--doc-max-bytes)",
            too_large=True,
        )
    if not data.strip():
        raise DocumentError(f"the file {filename!r} is empty")
    if kind == "pdf":
        doc = _pdf(data, limits.max_pages, deadline)
    elif kind == "docx":
        doc = LoadedDocument(docx_text(data, limits.max_unpacked_bytes, deadline), kind)
    else:
        text = _decode(data)
        doc = LoadedDocument(_html_text(text) if kind == "html" else text, kind)
    if not doc.text.strip():
        raise DocumentError(f"the file {filename!r} has no text")
    return doc


def _decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DocumentError(f"the file is not UTF-8 text (byte {e.start})") from None
    if "\x00" in text:
        raise DocumentError("the file is binary, not text (it contains NUL bytes)")
    return text


class _TextOnly(HTMLParser):
    SKIP = {"script", "style", "noscript", "template", "head"}
    BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in self.SKIP:
            self._skipping += 1
        elif tag in self.BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self._skipping:
            self._skipping -= 1
        elif tag in self.BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def _html_text(html: str) -> str:
    parser = _TextOnly()
    parser.feed(html)
    parser.close()
    paragraphs = (" ".join(p.split()) for p in "".join(parser.parts).split("\n\n"))
    return "\n\n".join(p for p in paragraphs if p)


# PDFium is not thread-safe: one document is read at a time in this process.
_PDFIUM = threading.Lock()


def _pdf_pages(data: bytes, max_pages: int | None, deadline: Deadline) -> list[str]:
    import pypdfium2  # only PDF uploads pay for the import

    with _PDFIUM:
        try:
            pdf = pypdfium2.PdfDocument(data)
        except pypdfium2.PdfiumError as e:
            raise DocumentError(f"not a readable PDF: {e}") from None
        try:
            n = len(pdf)
            if max_pages is not None and n > max_pages:
                raise DocumentError(
                    f"the PDF has {n} pages; the limit is {max_pages} (--doc-max-pages)",
                    too_large=True,
                )
            pages = []
            for i in range(n):
                deadline.check(f"reading page {i + 1} of {n}")
                pages.append(_page_text(pdf[i]))
            return pages
        finally:
            pdf.close()


def _page_text(page: Any) -> str:
    textpage = page.get_textpage()
    try:
        text = textpage.get_text_range()
    finally:
        textpage.close()
        page.close()
    # PDFium ends lines with CRLF and marks a word broken at a line end with U+FFFE.
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\ufffe", "").replace("\x00", "")


def _pdf(data: bytes, max_pages: int | None, deadline: Deadline) -> LoadedDocument:
    pages = _pdf_pages(data, max_pages, deadline)
    text, starts = "", []
    for page in pages:
        if text:
            text += PAGE_BREAK
        starts.append(len(text))
        text += page.strip()
    if not text.strip():
        raise DocumentError("the PDF has no extractable text (scanned images need OCR)")
    return LoadedDocument(text, "pdf", starts)
