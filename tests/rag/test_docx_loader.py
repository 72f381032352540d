from __future__ import annotations

import io
import zipfile

import pytest

from rag.docx_loader import MAX_PARTS, docx_text
from rag.errors import DocumentError
from rag.parse_limits import Deadline
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


def _bomb(unpacked: int) -> bytes:
    """A DOCX whose document part unpacks to `unpacked` bytes of spaces (a zip bomb)."""
    source, out = zipfile.ZipFile(io.BytesIO(make_docx("T", ["x"]))), io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            if item.filename != "word/document.xml":
                target.writestr(item, source.read(item.filename))
        with target.open("word/document.xml", "w", force_zip64=True) as part:
            for _ in range(unpacked >> 20):
                part.write(b" " * (1 << 20))
    return out.getvalue()


def test_a_zip_bomb_is_refused_from_its_directory_before_anything_is_unpacked():
    data = _bomb(256 << 20)
    assert len(data) < 1 << 20  # a thousand to one
    with pytest.raises(DocumentError, match="unpacks to 26.* bytes; the limit is 67108864") as e:
        docx_text(data, max_unpacked=64 << 20)
    assert e.value.too_large
    assert docx_text(make_docx("Fine", ["small"]), max_unpacked=64 << 20).startswith("# Fine")


def test_a_directory_that_understates_a_part_unpacks_no_more_than_it_states():
    """The directory's sizes are what the check reads: a part that says it is small is read
    only that far by zipfile (and then fails its checksum), never inflated whole."""
    data = bytearray(_bomb(8 << 20))
    entry = data.find(b"PK\x01\x02")  # the central directory's entries, one by one
    while data[entry + 46 : entry + 46 + 17] != b"word/document.xml":
        entry = data.find(b"PK\x01\x02", entry + 4)
    data[entry + 24 : entry + 28] = (100).to_bytes(4, "little")  # its unpacked size: 100
    listed = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("word/document.xml")
    assert listed.file_size == 100
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(io.BytesIO(bytes(data))).read("word/document.xml")
    with pytest.raises(DocumentError, match="not a readable DOCX file"):
        docx_text(bytes(data), max_unpacked=64 << 20)


def test_a_zip_of_too_many_parts_is_refused_before_zipfile_lists_them():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for i in range(MAX_PARTS + 1):
            target.writestr(f"p{i}", b"")
    with pytest.raises(DocumentError, match=f"has {MAX_PARTS + 1} parts") as e:
        docx_text(out.getvalue(), max_unpacked=64 << 20)
    assert e.value.too_large


def test_reading_stops_at_the_deadline():
    with pytest.raises(DocumentError, match="took longer than 0 s") as e:
        docx_text(make_docx("T", ["a", "b"]), deadline=Deadline(0.0))
    assert e.value.too_large
