from __future__ import annotations

import io
import zipfile

import pytest

from rag.docx_loader import docx_text
from rag.errors import DocumentError
from tests.rag.docx_files import corrupt_docx, make_docx


def test_headings_paragraphs_lists_and_tables_come_in_document_order():
    data = make_docx(
        "Volcanoes",
        ["Mount Etna is in Sicily.", "It   erupts often."],
        [["name", "height"], ["Etna", "3357 m"]],
    )
    assert docx_text(data) == (
        "# Volcanoes\n\nMount Etna is in Sicily.\n\nIt erupts often.\n\n- a listed point\n\n"
        "name | height\nEtna | 3357 m"
    )


def _without(data: bytes, part: str) -> bytes:
    source, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            if item.filename != part:
                target.writestr(item, source.read(item.filename))
    return out.getvalue()


def _broken_xml(data: bytes) -> bytes:
    source, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            body = source.read(item.filename)
            target.writestr(item, b"<w:document" if item.filename == "word/document.xml" else body)
    return out.getvalue()


@pytest.mark.parametrize(
    "data",
    [
        corrupt_docx(),
        b"PK\x03\x04 not really a zip",
        b"plain words, not a zip at all",
        _without(make_docx("T", ["x"]), "word/document.xml"),
        _without(make_docx("T", ["x"]), "[Content_Types].xml"),
        _broken_xml(make_docx("T", ["x"])),
    ],
)
def test_unreadable_files_raise_document_error(data: bytes):
    with pytest.raises(DocumentError, match="not a readable DOCX file"):
        docx_text(data)
