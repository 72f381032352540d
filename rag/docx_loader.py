"""DOCX (Word) files -> Markdown text: headings as `#` lines, paragraphs as they are, list items
as `- ` lines, tables as one line per row with ` | ` between the cells, all in document order.

Markdown because the splitter then keeps a heading with the text under it (rag/chunker.py splits
`docx` documents as Markdown). python-docx reads the file; a file it cannot read (not a zip,
no document part, broken XML) raises `DocumentError`.
"""

from __future__ import annotations

import io
import re
import zipfile

from rag.errors import DocumentError

HEADING = re.compile(r"^(?:Heading|Title)\s*(\d*)$", re.IGNORECASE)


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


def docx_text(data: bytes) -> str:
    from docx import Document  # only DOCX uploads pay for the import
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table

    try:
        document = Document(io.BytesIO(data))
        blocks = [
            _table(block) if isinstance(block, Table) else _paragraph(block)
            for block in document.iter_inner_content()
        ]
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, OSError) as e:
        raise DocumentError(f"not a readable DOCX file: {e}") from None
    except Exception as e:  # lxml's XMLSyntaxError and the like: still the file's fault
        raise DocumentError(f"not a readable DOCX file: {type(e).__name__}: {e}") from None
    return "\n\n".join(b for b in blocks if b)
