"""DOCX files made on the spot for tests (python-docx): a heading, paragraphs, a list item and a
table, in that order."""

from __future__ import annotations

import io

from docx import Document


def make_docx(title: str, paragraphs: list[str], table: list[list[str]] | None = None) -> bytes:
    document = Document()
    document.add_heading(title, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    document.add_paragraph("a listed point", style="List Bullet")
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, text in enumerate(row):
                grid.cell(r, c).text = text
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def corrupt_docx() -> bytes:
    """A real DOCX cut in half: a zip without its central directory."""
    data = make_docx("Cut", ["This file is cut short."])
    return data[: len(data) // 2]


def empty_docx() -> bytes:
    """A valid DOCX without a word in it."""
    out = io.BytesIO()
    Document().save(out)
    return out.getvalue()
