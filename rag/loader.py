"""Loaders: bytes of an uploaded file -> `LoadedDocument` (plain text and where pages start).

Plain text, Markdown (kept as written: it reads well to the model and the splitter knows its
structure), HTML (text only, scripts and styles dropped), PDF (PDFium, one page after another,
page numbers kept: rag/pdf_pages.py), DOCX (as Markdown, rag/docx_loader.py), source code or
any other `text/*` upload (as plain text) and images of pages (PNG, JPEG, TIFF, WebP:
rag/ocr/page_images.py). Anything else, or a file that is empty, corrupt or over the byte limit,
raises `DocumentError` saying why; nothing is half-loaded.

Pages without a text layer (a scanned PDF's, some of a mixed PDF's, every page of an image) are
left empty and listed in `ocr_pages` when the limits allow OCR: the ingestion worker reads them
later (rag/ocr/ocr_reader.py). Without OCR an image is refused and a PDF keeps the pages that
have text (one with none is refused).

What reading may cost beyond the upload's size is bounded by `ParseLimits`: a PDF's pages (its
page count is read before any page), a DOCX's unpacked size (read from the zip's directory
before any part is unpacked: a zip bomb is refused without inflating it), an image's pixels
(from its header, before a pixel is decoded), the pages left to OCR and the time reading
takes, checked between pages and between a DOCX's blocks (a page or block is not interrupted).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import PurePath

from rag.docx_loader import docx_text
from rag.errors import DocumentError
from rag.ocr.page_images import count_pages
from rag.parse_limits import Deadline, ParseLimits
from rag.pdf_pages import image_pixels, page_texts, too_many_pixels

KINDS = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".tif": "image",
    ".tiff": "image",
    ".webp": "image",
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
ACCEPTED = (
    ".txt, .md, .html, .pdf, .docx, source code, any text/* content type, or an image of a page"
    " (.png, .jpg, .tiff, .webp)"
)
MIME_KINDS = {
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/html": "html",
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "image/png": "image",
    "image/jpeg": "image",
    "image/tiff": "image",
    "image/webp": "image",
}
PAGE_BREAK = "\n\n"
# A page whose text layer has fewer visible characters than this is read by OCR (a scan with
# a stamped page number or an invisible header is still a scan); OCR's text replaces it.
MIN_PAGE_CHARS = 8


@dataclass(slots=True)
class LoadedDocument:
    text: str
    kind: str  # text | markdown | html | pdf | docx | image
    # Character offset where each page starts (PDF, image: page i+1 starts at page_starts[i]);
    # empty for formats without pages.
    page_starts: list[int] = field(default_factory=list)
    # Pages (1-based) whose text OCR is to read; their text is empty until then.
    ocr_pages: list[int] = field(default_factory=list)

    def page_at(self, offset: int) -> int | None:
        """1-based page holding character `offset`, or None for formats without pages."""
        if not self.page_starts:
            return None
        return max(bisect_right(self.page_starts, offset), 1)

    def pages(self) -> list[str]:
        """Each page's text (formats with pages); the inverse of `paged`."""
        bounds = [*self.page_starts, len(self.text)]
        return [self.text[a:b].strip() for a, b in zip(bounds, bounds[1:], strict=False)]


def paged(pages: list[str], kind: str, ocr_pages: list[int] | None = None) -> LoadedDocument:
    """One document of `pages`' texts, one after another, each page's start kept."""
    text, starts = "", []
    for page in pages:
        if text:
            text += PAGE_BREAK
        starts.append(len(text))
        text += page.strip()
    return LoadedDocument(text, kind, starts, list(ocr_pages or []))


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
        doc = _pdf(data, limits, deadline)
    elif kind == "image":
        doc = _image(data, limits, deadline)
    elif kind == "docx":
        doc = LoadedDocument(docx_text(data, limits.max_unpacked_bytes, deadline), kind)
    else:
        text = _decode(data)
        doc = LoadedDocument(_html_text(text) if kind == "html" else text, kind)
    if not doc.text.strip() and not doc.ocr_pages:
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


def _pdf(data: bytes, limits: ParseLimits, deadline: Deadline) -> LoadedDocument:
    pages = page_texts(data, limits.max_pages, deadline)
    scanned = [i + 1 for i, p in enumerate(pages) if len("".join(p.split())) < MIN_PAGE_CHARS]
    if limits.ocr_max_pages is None:
        if not "".join(pages).strip():
            raise DocumentError(
                f"the PDF has no extractable text (scanned pages need OCR: {limits.no_ocr})"
            )
        return paged(pages, "pdf")
    _check_ocr_pages(len(scanned), limits.ocr_max_pages, "pages without text")
    for page, pixels in image_pixels(data, scanned, deadline).items():
        if pixels > limits.max_image_pixels:
            raise too_many_pixels(page, pixels, limits.max_image_pixels)
    for page in scanned:
        pages[page - 1] = ""
    return paged(pages, "pdf", scanned)


def _image(data: bytes, limits: ParseLimits, deadline: Deadline) -> LoadedDocument:
    if limits.ocr_max_pages is None:
        raise DocumentError(f"images of pages are read by OCR: {limits.no_ocr}")
    n = count_pages(data, limits.max_image_pixels, limits.ocr_max_pages, deadline)
    return paged([""] * n, "image", list(range(1, n + 1)))


def _check_ocr_pages(n: int, limit: int, what: str) -> None:
    if n > limit:
        raise DocumentError(
            f"the document has {n} {what} to read by OCR; the limit is {limit} (--ocr-max-pages)",
            too_large=True,
        )
