from __future__ import annotations

import pytest
from PIL import Image

from rag.errors import OcrError
from rag.ocr.tesseract import Tesseract, probe
from tests.rag.scans import scanned_page

TEXT = "The night ferry to Stromness leaves the pier at eleven."


def test_probe_finds_tesseract_and_its_english_data():
    info = probe()
    assert info.version.startswith("tesseract") and "eng" in info.languages


def test_probe_of_a_missing_binary_says_it_is_not_installed():
    with pytest.raises(OcrError, match="not installed"):
        probe("tesseract-that-is-not-there")


def test_a_scanned_page_is_read():
    text = Tesseract().read(scanned_page(TEXT), timeout=60)
    assert all(w in text for w in ("ferry", "Stromness", "eleven"))


def test_a_blank_page_reads_as_nothing():
    assert Tesseract().read(Image.new("L", (600, 800), 255), timeout=60) == ""


def test_a_page_over_its_time_is_killed_and_says_so():
    with pytest.raises(OcrError) as e:
        Tesseract().read(scanned_page(TEXT), timeout=0.001)
    assert e.value.timed_out and "longer than 0.001 s" in e.value.message


def test_a_missing_language_fails_the_page_with_tesseract_s_reason():
    with pytest.raises(OcrError, match="tesseract failed") as e:
        Tesseract("zzz").read(scanned_page(TEXT), timeout=60)
    assert not e.value.timed_out


@pytest.mark.parametrize("lang", ["", "eng deu", "eng;rm", "-l", "eng+"])
def test_only_language_codes_are_taken(lang: str):
    with pytest.raises(ValueError, match="not a tesseract language list"):
        Tesseract(lang)
