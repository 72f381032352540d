"""`log_callback`: one kept C callback per logger, filtering with the latest filter asked for."""

from __future__ import annotations

import logging

import pytest

from mm.ggml_log import log_callback


def test_the_kept_callback_filters_with_the_latest_filter(caplog: pytest.LogCaptureFixture):
    log = logging.getLogger("tests.ggml_log")
    caplog.set_level(logging.DEBUG, logger=log.name)
    quiet = log_callback(log, "llama.cpp", lambda level: level >= logging.WARNING)
    quiet(1, b"a debug line\n", None)  # type: ignore[operator]
    assert "a debug line" not in caplog.text
    verbose = log_callback(log, "llama.cpp", lambda level: True)  # a verbose model, later
    assert verbose is quiet  # llama.cpp holds the first pointer: the same callback
    quiet(1, b"another debug line\n", None)  # type: ignore[operator]
    assert "llama.cpp: another debug line" in caplog.text
    quiet(4, b"an error\n", None)  # type: ignore[operator]
    assert [r.levelno for r in caplog.records] == [logging.DEBUG, logging.ERROR]
