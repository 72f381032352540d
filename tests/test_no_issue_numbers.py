"""No code comment or docstring under app/, mm/, rag/, bench/ or scripts/, and no comment in the
Makefile, pyproject.toml or .ci/run, cites an issue number: a reader of the code cannot see the
tracker, so a comment says the why in plain words."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("app", "mm", "rag", "bench", "scripts")
FILES = ("Makefile", "pyproject.toml", ".ci/run")  # comments with #, as in a shell script

# "issue 29", "Issue #29", "issues 11 and 26"; "#29" or "(#29)" standing alone (not a hex
# colour such as #fff or #3366ff, not a port such as :8080, not "#" starting a comment).
ISSUE = re.compile(r"\bissues?\s*#?\d+\b|(?<![\w&/])#\d{1,5}(?![\w])", re.IGNORECASE)


def python_prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python source."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string.lstrip("#")))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                out.append((node.body[0].lineno, doc))
    return out


def shell_comments(source: str) -> list[tuple[int, str]]:
    """(line, text) of every line comment of a shell script (a # at the start of a word)."""
    out = []
    for n, line in enumerate(source.splitlines(), 1):
        if m := re.search(r"(?:^|\s)#(.*)$", line):
            out.append((n, m.group(1)))
    return out


def citations(source: str, suffix: str) -> list[tuple[int, str]]:
    """(line, the citation) of every issue number in the source's comments and docstrings."""
    prose = python_prose(source) if suffix == ".py" else shell_comments(source)
    return [(line, m.group(0)) for line, text in prose for m in ISSUE.finditer(text)]


def sources() -> list[Path]:
    code = (p for folder in FOLDERS for p in (ROOT / folder).rglob("*"))
    return sorted(p for p in code if p.suffix in (".py", ".sh")) + [ROOT / f for f in FILES]


def test_no_comment_or_docstring_cites_an_issue_number():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {cited!r}"
        for path in sources()
        for line, cited in citations(path.read_text(encoding="utf-8"), path.suffix)
    ]
    assert found == [], "say the why in plain words instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("text", "suffix"),
    [
        ("# blend targets (issue 26)", ".py"),
        ('"""Tool calling (Issue #29): calls stored as made."""', ".py"),
        ('def f():\n    """As fixed in issues 11 and 26."""', ".py"),
        ("x = 1  # see #31 for the figures", ".py"),
        ("make build  # (#7)", ".sh"),
    ],
)
def test_an_issue_number_in_a_comment_or_docstring_is_found(text: str, suffix: str):
    assert len(citations(text + "\n", suffix)) == 1


@pytest.mark.parametrize(
    ("text", "suffix"),
    [
        ("# listens on 127.0.0.1:8080 by default", ".py"),
        ("# colours #fff and #3366ff, the tissue 3 lines down", ".py"),
        ("x = 'issue 12'  # a string, not a comment or docstring", ".py"),
        ('"""Port 5432 is PostgreSQL\'s; an issue with 4 slots."""', ".py"),
        ('curl "$URL#12"  # an anchor in a URL', ".sh"),
    ],
)
def test_ports_colours_and_strings_are_not_issue_numbers(text: str, suffix: str):
    assert citations(text + "\n", suffix) == []
