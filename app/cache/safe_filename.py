"""Client-chosen file names (`/slots` save|restore): one plain file inside one directory.

Ported from llama.cpp's `fs_validate_filename` (common/common.cpp, without subdirectories), plus
one stricter rule: no leading dot. That rejects ".", ".." and hidden files in one go, and keeps
client names apart from our own temp files (".kvchat-*.tmp", see state_file.write).
"""

from __future__ import annotations

from pathlib import Path

MAX_BYTES = 255  # the usual file-system limit on one path component

# Characters Windows forbids, and look-alikes of "." "/" "\" that some tools normalise to them.
_FORBIDDEN = frozenset(':*?"<>|') | {"\uff0e", "\u2215", "\u2216"}
# U+FFFD means the client's text was already mangled; U+FEFF is an invisible BOM.
_INVISIBLE = frozenset("\ufffd\ufeff")


def filename_problem(name: str) -> str | None:
    """Why `name` is not an acceptable file name, or None if it is."""
    if not name:
        return "it is empty"
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, e.g. from a JSON "\ud800" escape
        return "it is not valid UTF-8"
    if len(raw) > MAX_BYTES:
        return f"it is longer than {MAX_BYTES} bytes"
    for ch in name:
        c = ord(ch)
        if c <= 0x1F or c == 0x7F or 0x80 <= c <= 0x9F:  # C0 (incl. NUL), DEL, C1
            return "it contains a control character"
        if ch in "/\\":
            return "it contains a path separator"
        if ch in _FORBIDDEN or ch in _INVISIBLE:
            return f"it contains the forbidden character {ch!r}"
    if name.startswith("."):
        return "it starts with a dot"
    # Windows strips these, which would silently name another file.
    if name.startswith(" ") or name.endswith((" ", ".")):
        return "it starts or ends with a space, or ends with a dot"
    if ".." in name:  # stricter than needed (llama.cpp does the same): no ".." anywhere
        return "it contains '..'"
    return None


def path_in(directory: Path, name: str) -> Path:
    """`directory / name` after checking that it names a plain entry of `directory` itself.

    Raises ValueError (with the reason) otherwise. The directory need not exist yet. An
    existing symlink is refused too: it could point anywhere, and os.replace over it would
    replace the link, not what it points to.
    """
    problem = filename_problem(name)
    if problem is not None:
        raise ValueError(f"invalid filename {name!r}: {problem}")
    base = directory.resolve()
    path = base / name
    if path.parent != base or path.is_symlink() or path.resolve() != path:
        raise ValueError(f"invalid filename {name!r}: it does not name a file in the directory")
    return path
