"""scripts/import_graph.py: the tree has no import circle, no upward import and no import of the
engine's insides from the rest of app/, and the checker finds each when it is there."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "import_graph.py"


def load_checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_tree_has_no_circle_and_nothing_upward():
    report = load_checker().check(ROOT)
    assert report.circles == []
    assert report.upward == []
    assert report.inside == []


def test_the_script_exits_0_on_the_tree():
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no circle, nothing upward, doors kept" in done.stdout


def test_circles_and_upward_imports_are_found(tmp_path: Path):
    write(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/engine/__init__.py": "",
            # A circle through a TYPE_CHECKING import and a relative one still counts.
            "app/engine/a.py": "from app.engine.b import B\n",
            "app/engine/b.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n"
            ),
            # The engine reaching up into a route, inside a function.
            "app/engine/c.py": "def f():\n    from app.api.openai import chat_routes\n",
            "app/api/__init__.py": "",
            "app/api/openai/__init__.py": "",
            "app/api/openai/chat_routes.py": "import app.engine.a\n",
            # A route module using another one (what two routes share is a service).
            "app/api/llama_server/__init__.py": "",
            "app/api/llama_server/token_routes.py": "from app.api.openai.chat_routes import x\n",
            # A route module's own schemas are services: routes may import them.
            "app/api/openai/chat_schemas.py": "",
            "app/api/openai/models_routes.py": "from app.api.openai import chat_schemas\n",
            "mm/__init__.py": "",
            "mm/image.py": "from app.cache import tiers\n",  # a library importing the app
            "rag/__init__.py": "",
            "bench/__init__.py": "",
            "bench/run.py": "from tests.server import ServerProcess\n",
            "app/cache/__init__.py": "",
            "app/cache/tiers.py": "",
        },
    )
    checker = load_checker()
    report = checker.check(tmp_path)
    assert report.circles == [["app.engine.a", "app.engine.b"]]
    assert report.upward == [
        "app.api.llama_server.token_routes (routes) -> app.api.openai.chat_routes (routes)",
        "app.engine.c (engine) -> app.api.openai.chat_routes (routes)",
        "bench.run (entry point) -> tests (tests)",
        "mm.image (library) -> app.cache.tiers (cache)",
    ]
    assert not report.clean
    assert checker.main([str(tmp_path)]) == 1


def test_imports_of_the_engines_insides_from_the_rest_of_app_are_found(tmp_path: Path):
    write(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/engine/__init__.py": "",
            "app/engine/engine.py": "from app.engine.core.loop import Loop\n",  # inside: fine
            "app/engine/request.py": "",
            "app/engine/core/__init__.py": "",
            "app/engine/core/loop.py": "",
            "app/engine/llama/__init__.py": "",
            "app/engine/llama/model.py": "",
            "app/docs/__init__.py": "",
            # The door: the package and the modules at its root.
            "app/docs/ok.py": (
                "import app.engine\nfrom app.engine import request\n"
                "from app.engine.engine import Engine\n"
            ),
            "app/docs/cli.py": "from app.engine.llama.model import Model\n",
            "app/docs/loop.py": "from app.engine import core\n",  # a subpackage is inside
            # Outside the package: benches and tests build parts directly.
            "bench/__init__.py": "",
            "bench/tiers.py": "from app.engine.llama.model import Model\n",
        },
    )
    checker = load_checker()
    report = checker.check(tmp_path)
    assert report.circles == [] and report.upward == []
    assert report.inside == [
        "app.docs.cli -> app.engine.llama.model (import from app.engine's root modules)",
        "app.docs.loop -> app.engine.core (import from app.engine's root modules)",
    ]
    assert checker.main([str(tmp_path)]) == 1
