"""scripts/patch_llama_cpp.py: the variant filter in ggml's CMakeLists, and the wheel's CMakeLists
without `common` and with every backend module installed. On small texts of the same shape, and
on the real sdist: cmake builds only the variants named."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.server import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import patch_llama_cpp as patch  # noqa: E402  (scripts/ is not a package)

GGML = """function(ggml_add_cpu_backend_variant tag_name)
    set(GGML_CPU_TAG_NAME ${tag_name})
endfunction()
"""
WHEEL = """function(llama_cpp_python_install_target target)
endfunction()
if (LLAMA_BUILD)
    set(LLAMA_BUILD_COMMON ON CACHE BOOL "Build llama.cpp common library" FORCE)
    add_subdirectory(vendor/llama.cpp)
endif()
"""


def test_the_variant_filter_goes_in_once() -> None:
    once = patch.patch_variants(GGML)
    assert patch.VARIANT_FILTER in once
    assert once.index(patch.VARIANT_HEAD) < once.index(patch.VARIANT_FILTER)
    assert patch.patch_variants(once) == once


def test_the_wheel_drops_common_and_installs_the_backend_modules_once() -> None:
    once = patch.patch_wheel(WHEEL)
    assert patch.COMMON_FORCE not in once and patch.COMMON_OFF in once
    assert once.endswith(patch.INSTALL_MODULES)
    assert patch.patch_wheel(once) == once


@pytest.mark.parametrize(
    ("text", "which"),
    [
        ("function(ggml_add_cpu_backend_variant name)\n", patch.patch_variants),
        ("project(llama_cpp)\n", patch.patch_wheel),
    ],
)
def test_a_changed_upstream_file_is_an_error_not_a_silent_no_op(text: str, which) -> None:  # noqa: ANN001
    with pytest.raises(patch.PatchError):
        which(text)


@pytest.mark.skipif(not shutil.which("cmake"), reason="cmake")
def test_cmake_configures_only_the_named_variants_of_the_real_sdist(tmp_path) -> None:  # noqa: ANN001
    sdist = subprocess.run(
        [str(ROOT / "scripts" / "llama_sdist.sh")], capture_output=True, text=True, check=True
    ).stdout.strip()
    configure = subprocess.run(
        ["cmake", "-S", f"{sdist}/vendor/llama.cpp", "-B", str(tmp_path), "-G", "Unix Makefiles"]
        + ["-DBUILD_SHARED_LIBS=ON", "-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=ON"]
        + ["-DGGML_NATIVE=OFF", "-DGGML_CPU_VARIANTS=x64,haswell", "-DLLAMA_BUILD_TESTS=OFF"]
        + ["-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=OFF", "-DLLAMA_BUILD_COMMON=OFF"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert configure.returncode == 0, configure.stderr[-3000:]
    targets = subprocess.run(
        ["cmake", "--build", str(tmp_path), "--target", "help"], capture_output=True, text=True
    ).stdout.split()
    variants = {t for t in targets if t.startswith("ggml-cpu-") and not t.endswith("-feats")}
    assert variants == {"ggml-cpu-x64", "ggml-cpu-haswell"}
