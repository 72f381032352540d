"""The deadline readers check between pages and blocks."""

from __future__ import annotations

import pytest

from rag.errors import DocumentError
from rag.parse_limits import Deadline, ParseLimits


def test_a_deadline_is_up_once_its_time_has_passed():
    Deadline(None).check("anything")  # no limit
    Deadline(3600.0).check("page 1")
    with pytest.raises(DocumentError, match=r"longer than 0 s \(--doc-parse-timeout; stopped"):
        Deadline(0.0).check("page 9")


def test_limits_are_off_unless_given():
    assert ParseLimits() == ParseLimits(None, None, None)
