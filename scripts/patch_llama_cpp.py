"""The two changes this project makes to the llama-cpp-python sdist's build files.

    python scripts/patch_llama_cpp.py variants SRC   # SRC: the unpacked sdist (in place, once)
    python scripts/patch_llama_cpp.py wheel SRC      # SRC: a scratch copy of it, before `pip wheel`

`variants` (llama.cpp's ggml/src/CMakeLists.txt): `GGML_CPU_ALL_VARIANTS` builds every CPU variant
llama.cpp knows, 14 on x86-64, each a whole compile of the CPU backend. The patch lets
`-DGGML_CPU_VARIANTS=a,b,c` (comma-separated) name the ones to build; unset, the file behaves as
upstream's, so llama-server and the conformance tests still read llama.cpp's own tree. Applied to
the unpacked sdist by scripts/llama_sdist.sh, so the wheel, llama-server and the GPU kit (which
all build from that copy) share it.

`wheel` (llama-cpp-python's CMakeLists.txt):
- its force of `LLAMA_BUILD_COMMON` goes: llama.cpp's `common` (argument parsing, chat parsers,
  JSON schema, cpp-httplib) is the heaviest C++ of the tree, and the Python bindings never load
  libllama-common;
- the backends ggml builds as loadable modules (`GGML_BACKEND_DL`: the CPU variants, CUDA,
  Vulkan) are installed beside libllama in `llama_cpp/lib`; upstream installs only fixed target
  names (`ggml-cpu`, `ggml-cuda`, ...), so the variants' modules would be left out of the wheel.

Both are idempotent and fail loudly when the text they expect is gone (a new sdist): a silent
no-op would build all 14 variants, or a wheel without its CPU backend.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

MARK = "# kvchat:"

VARIANT_HEAD = "function(ggml_add_cpu_backend_variant tag_name)\n"
VARIANT_FILTER = f"""    {MARK} -DGGML_CPU_VARIANTS=a,b,c builds those variants alone (unset: all)
    if (GGML_CPU_VARIANTS)
        string(REPLACE "," ";" _kvchat_variants "${{GGML_CPU_VARIANTS}}")
        if (NOT tag_name IN_LIST _kvchat_variants)
            return()
        endif()
    endif()
"""

COMMON_FORCE = 'set(LLAMA_BUILD_COMMON ON CACHE BOOL "Build llama.cpp common library" FORCE)'
COMMON_OFF = f"{MARK} common not built (the bindings never load it)"
INSTALL_MODULES = f"""
{MARK} every backend ggml builds as a loadable module (GGML_BACKEND_DL), CPU variants included
if (GGML_BACKEND_DL)
    foreach(backend ${{GGML_AVAILABLE_BACKENDS}})
        llama_cpp_python_install_target(${{backend}})
    endforeach()
endif()
"""


class PatchError(RuntimeError):
    pass


def patch_variants(text: str) -> str:
    """ggml/src/CMakeLists.txt with the variant filter at the top of the variant function."""
    if VARIANT_FILTER in text:
        return text
    if text.count(VARIANT_HEAD) != 1:
        raise PatchError("ggml_add_cpu_backend_variant is no longer defined as expected")
    return text.replace(VARIANT_HEAD, VARIANT_HEAD + VARIANT_FILTER)


def patch_wheel(text: str) -> str:
    """llama-cpp-python's CMakeLists.txt without common, installing every backend module."""
    if COMMON_FORCE in text:
        text = text.replace(COMMON_FORCE, COMMON_OFF)
    elif COMMON_OFF not in text:
        raise PatchError("the sdist no longer forces LLAMA_BUILD_COMMON as expected")
    if INSTALL_MODULES not in text:
        if "function(llama_cpp_python_install_target target)" not in text:
            raise PatchError("llama_cpp_python_install_target is gone")
        text += INSTALL_MODULES
    return text


def apply(path: Path, patch) -> bool:
    """Patch `path` in place; whether it changed."""
    before = path.read_text()
    after = patch(before)
    if after != before:
        path.write_text(after)
    return after != before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("which", choices=["variants", "wheel"])
    parser.add_argument("src", type=Path, help="the unpacked llama-cpp-python sdist")
    args = parser.parse_args(argv)
    if args.which == "variants":
        target, patch = args.src / "vendor/llama.cpp/ggml/src/CMakeLists.txt", patch_variants
    else:
        target, patch = args.src / "CMakeLists.txt", patch_wheel
    try:
        changed = apply(target, patch)
    except (OSError, PatchError) as e:
        print(f"patch_llama_cpp.py: {target}: {e}", file=sys.stderr)
        return 1
    if changed:
        print(f"patch_llama_cpp.py: patched {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
