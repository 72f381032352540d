"""llama.cpp / mtmd log lines into Python logging.

llama.cpp keeps the raw callback pointer: each callback made here is kept alive for the life of
the process (one per logger, made once). Its filter is the latest one asked for: a model made
verbose after a quiet one in the same process logs verbosely.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable

import llama_cpp

# ggml_log_level: 1 DEBUG, 2 INFO, 3 WARN, 4 ERROR, 5 CONT (continues the last line).
_LEVELS = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_KEPT: dict[str, object] = {}
_FILTERS: dict[str, Callable[[int], bool]] = {}


def log_callback(log: logging.Logger, prefix: str, keep: Callable[[int], bool]) -> object:
    """A llama_log_callback that sends the lines `keep(python_level)` accepts to `log`."""
    name = f"{log.name}:{prefix}"
    _FILTERS[name] = keep
    if name not in _KEPT:

        @llama_cpp.llama_log_callback
        def _callback(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
            py_level = _LEVELS.get(level, logging.DEBUG)
            if _FILTERS[name](py_level) and log.isEnabledFor(py_level):
                log.log(py_level, "%s: %s", prefix, text.decode("utf-8", "replace").rstrip())

        _KEPT[name] = _callback
    return _KEPT[name]
