"""DOCX (Word) files -> Markdown text: headings as `#` lines, paragraphs as they are, list items
as `- ` lines, tables as one line per row with ` | ` between the cells, all in document order.

Markdown because the splitter then keeps a heading with the text under it (rag/chunker.py splits
`docx` documents as Markdown). python-docx reads the file; a file it cannot read (not a zip,
no document part, broken XML) raises `DocumentError`.

python-docx unpacks every part whole, so the zip's directory is read first: a file of more
parts than any document has, or whose parts unpack to more than the limit (a zip bomb: a few
megabytes that inflate to gigabytes), is refused before anything is unpacked. The sizes the
directory states are what Python's zipfile unpacks at most, so they can be trusted.
"""

from __future__ import annotations

import io
import re
import struct
import zipfile

from rag.errors import DocumentError
from rag.parse_limits import Deadline

HEADING = re.compile(r"^(?:Heading|Title)\s*(\d*)$", re.IGNORECASE)
# Parts of a zip read at most: a DOCX has tens, hundreds with many images; zipfile builds an
# object per entry of the directory (a 20 MB file can list 250,000 of them).
MAX_PARTS = 10_000
_END = b"PK\x05\x06"  # the zip's end of central directory record


def _paragraph(paragraph) -> str:  # noqa: ANN001 (a python-docx Paragraph)
    text = " ".join(paragraph.text.split())
    if not text:
        return ""
    style = paragraph.style.name if paragraph.style is not None else ""
    heading = HEADING.match(style or "")
    if heading:
        level = int(heading.group(1) or 1) if style.lower().startswith("heading") else 1
        return "#" * min(max(level, 1), 6) + " " + text
    if (style or "").lower().startswith("list"):
        return "- " + text
    return text


def _table(table) -> str:  # noqa: ANN001 (a python-docx Table)
    rows = []
    for row in table.rows:
        cells = []
        for cell in row.cells:
            text = " ".join(cell.text.split())
            if not cells or cells[-1] != text:  # a merged cell repeats in each column it spans
                cells.append(text)
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)


def _listed_parts(data: bytes) -> int | None:
    """The entry count the zip's end record states (None: no plain end record; zipfile
    decides), read before zipfile builds an object per entry."""
    at = data.rfind(_END, max(0, len(data) - (1 << 16) - 22))
    if at < 0 or at + 22 > len(data):
        return None
    (entries,) = struct.unpack_from("<H", data, at + 10)
    return None if entries == 0xFFFF else entries  # 0xFFFF: a zip64 record holds the count


def check_unpacked(data: bytes, max_unpacked: int) -> None:
    """DocumentError (too large) for a zip whose parts unpack to more than `max_unpacked`
    bytes together, or that lists more than MAX_PARTS of them."""
    listed = _listed_parts(data)
    if listed is not None and listed > MAX_PARTS:
        raise DocumentError(
            f"the file has {listed} parts; the most read is {MAX_PARTS}", too_large=True
        )
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            parts = zf.infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise DocumentError(f"not a readable DOCX file: {e}") from None
    if len(parts) > MAX_PARTS:
        raise DocumentError(
            f"the file has {len(parts)} parts; the most read is {MAX_PARTS}", too_large=True
        )
    unpacked = sum(part.file_size for part in parts)
    if unpacked > max_unpacked:
        raise DocumentError(
            f"the file unpacks to {unpacked} bytes; the limit is {max_unpacked} "
            "(--doc-max-unpacked-bytes)",
            too_large=True,
        )


def docx_text(
    data: bytes, max_unpacked: int | None = None, deadline: Deadline | None = None
) -> str:
    """The text as Markdown; `max_unpacked`: the most bytes the parts may unpack to together;
    `deadline`: checked between blocks."""
    from docx import Document  # only DOCX uploads pay for the import
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table

    if max_unpacked is not None:
        check_unpacked(data, max_unpacked)
    deadline = deadline or Deadline(None)
    try:
        document = Document(io.BytesIO(data))
        blocks = []
        for i, block in enumerate(document.iter_inner_content()):
            deadline.check(f"reading block {i + 1}")
            blocks.append(_table(block) if isinstance(block, Table) else _paragraph(block))
    except DocumentError:
        raise
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, OSError) as e:
        raise DocumentError(f"not a readable DOCX file: {e}") from None
    except Exception as e:  # lxml's XMLSyntaxError and the like: still the file's fault
        raise DocumentError(f"not a readable DOCX file: {type(e).__name__}: {e}") from None
    return "\n\n".join(b for b in blocks if b)
