"""What OCR a server does, from its settings: Debian's tesseract probed at start; without it,
or without the data of a language asked for, the server runs without OCR and says why."""

from __future__ import annotations

import pytest

from app.config import Settings
from app.docs.ocr_setup import ocr_setup
from rag.ocr.tesseract import Tesseract
from rag.parse_limits import ParseLimits


def test_the_default_reads_english_with_tesseract():
    setup = ocr_setup(Settings(ocr_page_timeout=5.0, ocr_max_pages=7))
    assert setup.options is not None and setup.options.page_timeout == 5.0
    assert setup.options.engine == Tesseract("eng", 1, setup.options.engine.binary)
    limits = setup.parse_limits(ParseLimits(max_pages=9))
    assert (limits.max_pages, limits.ocr_max_pages, limits.max_image_pixels) == (9, 7, 50_000_000)


def test_off_is_no_ocr_and_says_so():
    setup = ocr_setup(Settings(ocr="off"))
    assert setup.options is None and "--ocr off" in setup.no_ocr
    assert setup.parse_limits(ParseLimits()).ocr_max_pages is None


def test_a_language_without_its_data_turns_ocr_off_naming_the_package():
    setup = ocr_setup(Settings(ocr_lang="eng+chi_sim"))
    assert setup.options is None
    assert "--ocr-lang chi_sim" in setup.no_ocr and "tesseract-ocr-chi-sim" in setup.no_ocr


def test_no_tesseract_is_no_ocr_and_says_it_is_not_installed(
    monkeypatch: pytest.MonkeyPatch, tmp_path
):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing to run there
    setup = ocr_setup(Settings())
    assert setup.options is None and "not installed" in setup.no_ocr


@pytest.mark.parametrize("lang", ["eng;rm -rf", "-l", "eng+"])
def test_ocr_lang_takes_language_codes_only(lang: str):
    with pytest.raises(ValueError, match="ocr_lang"):
        Settings(ocr_lang=lang)
