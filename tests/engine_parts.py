"""The one place tests reach into an `Engine`: its parts (app/engine/core/engine_parts.py).

Code outside app/engine enters the engine through `Engine`'s methods and documented properties
only (ruff's SLF001 and scripts/import_graph.py keep it so). A test that checks what a part
did (the KV a slot holds, what prefix reuse saved) asks here, so that reach is written once.
"""

from __future__ import annotations

import threading

from app.engine.core.engine_parts import EngineParts
from app.engine.engine import Engine


def parts_of(engine: Engine) -> EngineParts:
    """The engine's parts, the model among them."""
    return engine._parts


def thread_of(engine: Engine) -> threading.Thread | None:
    """The engine thread (None before `start`)."""
    return engine._thread
