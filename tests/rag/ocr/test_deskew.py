from __future__ import annotations

import pytest
from PIL import Image

from bench.workloads.scanned_pages import render
from rag.ocr.deskew import STEP, deskew, skew_angle

TEXT = "\n\n".join(
    "Tide tables for the northern harbours list the high and low water of every day "
    f"of the year, with the heights in metres above chart datum, part {i}."
    for i in range(6)
)


@pytest.fixture(scope="module")
def page() -> Image.Image:
    return render(TEXT, dpi=150)


@pytest.mark.parametrize("degrees", [-3.0, -1.5, 0.0, 2.0, 4.0])
def test_the_angle_that_levels_the_lines_is_found(page: Image.Image, degrees: float):
    turned = page.rotate(degrees, Image.Resampling.BICUBIC, expand=True, fillcolor=255)
    assert skew_angle(turned) == pytest.approx(-degrees, abs=STEP)


def test_a_level_page_is_left_as_it_is(page: Image.Image):
    assert deskew(page) is page


def test_a_turned_page_comes_back_level(page: Image.Image):
    turned = page.rotate(2.5, Image.Resampling.BICUBIC, expand=True, fillcolor=255)
    assert skew_angle(deskew(turned)) == pytest.approx(0.0, abs=STEP)


def test_a_blank_page_has_no_angle():
    assert skew_angle(Image.new("L", (400, 600), 255)) == 0.0
