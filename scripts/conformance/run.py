"""llama.cpp's own server tests (tools/server/tests/unit) run against kvchat: `make conformance`.

    .venv/bin/python scripts/conformance/run.py [FILE ...] [-- PYTEST_ARGS]
    .venv/bin/python scripts/conformance/run.py --record [--llama-server BIN] [FILE ...]

The suite ships in the llama-cpp-python sdist (scripts/llama_sdist.sh gets it once); its tests and
the chat templates they read are copied into build/conformance/llama.cpp, keeping their layout so
the suite's relative paths hold. The suite starts the binary named by LLAMA_SERVER_BIN_PATH with
llama-server's flags; here that is scripts/conformance/llama-server, which starts ours with the
same flags and the packaged model (no network).

What must pass: every test llama-server itself passes with the packaged model (recorded from the
real binary into scripts/conformance/llama_server_passes.txt by --record), except the intended
differences listed, each with its reason, in docs/llama-server.md; those must fail (strict
xfail). Any other failure fails the run (conformance_plugin.py). FILE: unit/test_x.py or
test_x.py; none: every file with a recorded pass (--record: every file), but for the files
of llama-server features not served here (the second table in docs/llama-server.md, each with
its reason). Tests marked slow are left out, as llama.cpp's tests.sh does by default.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from conformance_plugin import read_table  # beside this script

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "scripts" / "conformance"
DEST = ROOT / "build" / "conformance" / "llama.cpp"
TESTS = DEST / "tools" / "server" / "tests"
PASSES = HERE / "llama_server_passes.txt"
DIFFS = ROOT / "docs" / "llama-server.md"
LLAMA_SERVER = ROOT / "build" / "llama-server" / "bin" / "llama-server"
# The table in DIFFS of llama-server features not served here, whole test files.
FILES_START, FILES_END = "<!-- conformance-files:start -->", "<!-- conformance-files:end -->"
# Files outside tools/server/tests that tests read by relative path (--media-path ../../../tools).
EXTRA_FILES = ("tools/mtmd/test-1.jpeg",)


def copy_suite() -> None:
    """The sdist's server tests and chat templates into DEST, once per sdist."""
    out = subprocess.run(
        [str(ROOT / "scripts" / "llama_sdist.sh")],
        check=True,
        text=True,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHON": sys.executable},
    )
    llama = Path(out.stdout.strip().splitlines()[-1]) / "vendor" / "llama.cpp"
    stamp = DEST / ".source"  # the sdist copied; a run beside this one may be reading the copy
    source = f"{llama}\n{' '.join(EXTRA_FILES)}"
    if stamp.is_file() and stamp.read_text() == source:
        return
    shutil.rmtree(DEST, ignore_errors=True)
    shutil.copytree(llama / "tools" / "server" / "tests", TESTS)
    shutil.copytree(llama / "models" / "templates", DEST / "models" / "templates")
    for name in EXTRA_FILES:
        (DEST / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(llama / name, DEST / name)
    stamp.write_text(source)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def not_served(doc: Path = DIFFS) -> dict[str, str]:
    """File -> why, from the table of llama-server features this server does not have (their
    files are left out of a run that names no file)."""
    try:
        return read_table(doc, FILES_START, FILES_END)
    except ValueError as e:
        sys.exit(str(e))


def test_files(names: list[str], record: bool) -> list[str]:
    if names:
        return [n if n.startswith("unit/") else f"unit/{Path(n).name}" for n in names]
    if record or not PASSES.exists():
        return sorted(f"unit/{p.name}" for p in (TESTS / "unit").glob("test_*.py"))
    recorded = {line.split("::", 1)[0] for line in PASSES.read_text().splitlines() if line}
    skipped = not_served()
    present = {f"unit/{p.name}" for p in (TESTS / "unit").glob("*.py")}
    unknown = sorted(set(skipped) - present) if present else []  # checked once copied
    if unknown:
        sys.exit(f"{DIFFS}: the features table names no such file: {', '.join(unknown)}")
    for name in sorted(recorded & set(skipped)):
        print(f"left out: {name}: {skipped[name]}")
    return sorted(recorded - set(skipped))


def main() -> int:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="*", help="unit/test_x.py (default: see above)")
    p.add_argument("--record", action="store_true", help="run llama-server, write what passes")
    p.add_argument("--llama-server", default=str(LLAMA_SERVER), help="its binary (--record)")
    args = p.parse_args(argv)

    copy_suite()
    env = {
        **os.environ,
        "LLAMA_SERVER_BIN_PATH": str(HERE / "llama-server"),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "PYTHONPATH": str(HERE),
        # The suite's default port (8080) may be taken on a shared machine.
        "PORT": str(free_port()),
        "CONFORMANCE_MODE": "record" if args.record else "ours",
        "CONFORMANCE_PASSES": str(PASSES),
        "CONFORMANCE_DIFFS": str(DIFFS),
        # Waiting OpenMP threads sleep instead of spinning: the suite's servers share the cores
        # with whatever else runs, and spinning waiters slowed decoding a hundredfold then.
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
    }
    if args.record:
        if not Path(args.llama_server).is_file():
            sys.exit(f"no llama-server at {args.llama_server} (make llama-server)")
        env["CONFORMANCE_LLAMA_SERVER"] = str(Path(args.llama_server).resolve())
    files = test_files(args.files, args.record)
    plugins = ["-p", "conformance_plugin", "-p", "no:cacheprovider"]
    cmd = [sys.executable, "-m", "pytest", *plugins, "-m", "not slow", "-q", *files, *extra]
    code = subprocess.run(cmd, cwd=TESTS, env=env).returncode
    # Recording: llama-server's own failures are what is being recorded, not an error.
    return 0 if args.record and code == 1 else code


if __name__ == "__main__":
    sys.exit(main())
