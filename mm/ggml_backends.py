"""ggml's compute backends, loaded from the folder libllama came from, and what was chosen.

On x86-64 the llama-cpp-python wheel is built with `GGML_BACKEND_DL` (Makefile): the CPU backend
is one loadable module per CPU variant (`libggml-cpu-haswell.so`, `-zen4`, ...), each compiled for
one feature level, and ggml loads the best one this CPU can run (each module's
`ggml_backend_score` reads CPUID and scores 0 where an instruction it was built with is missing).
A GPU backend (CUDA, Vulkan) is one more module. llama.cpp looks for modules beside the
executable and in the working directory only: for Python that is python's own folder, where there
are none. So `load_backends` loads them from the wheel's library folder before anything else asks
(`llama_backend_init` loads nothing once a backend is registered).

A build without `GGML_BACKEND_DL` (the platform's defaults on aarch64 and macOS) registers its
backends itself; `load_backends` then only describes them, and the variant reads "builtin".

Only ctypes and the standard library: `make install` runs this on a wheel's libraries before the
wheel is installed (scripts/llama_wheel.py), to learn whether it runs on this CPU.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

BUILTIN = "builtin"  # the CPU backend is compiled into libggml (no GGML_BACKEND_DL)
AUTO = "auto"
_CPU_PREFIX = "libggml-cpu-"
_MODULE_SUFFIX = ".dll" if sys.platform == "win32" else ".so"  # ggml's, on macOS too
# ggml_backend_dev_type
_DEVICE_KINDS = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel"}


class BackendError(RuntimeError):
    """No CPU backend could be loaded, or the one asked for cannot run here."""


@dataclass(slots=True, frozen=True)
class ComputeDevice:
    name: str  # ggml's: "CPU", "CUDA0", "Vulkan0"
    description: str  # the CPU's model name, the card's name
    kind: str  # cpu, gpu, igpu or accel


@dataclass(slots=True, frozen=True)
class Backends:
    """What llama.cpp computes with in this process."""

    cpu_variant: str  # the CPU module's variant ("haswell", "zen4", ...) or "builtin"
    cpu_features: tuple[str, ...]  # what that module was compiled for: AVX2, AVX512, OPENMP, ...
    devices: tuple[ComputeDevice, ...]
    library_dir: str

    @property
    def gpus(self) -> tuple[ComputeDevice, ...]:
        return tuple(d for d in self.devices if d.kind in ("gpu", "igpu"))

    def summary(self) -> str:
        """One line for the start log: the variant and its features, then any GPU."""
        cpu = f"CPU variant {self.cpu_variant} ({' '.join(self.cpu_features) or 'no features'})"
        gpus = ", ".join(f"{d.name} ({d.description})" for d in self.gpus)
        return f"{cpu}; GPU: {gpus}" if gpus else f"{cpu}; no GPU backend"

    def as_dict(self) -> dict[str, object]:
        return {
            "cpu_variant": self.cpu_variant,
            "cpu_features": list(self.cpu_features),
            "devices": [
                {"name": d.name, "description": d.description, "type": d.kind} for d in self.devices
            ],
        }


def library_dir() -> Path:
    """Where llama-cpp-python loads libllama from: `LLAMA_CPP_LIB_PATH` (llama_cpp's own
    override) or the package's `lib` folder, found without importing the package."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise BackendError("llama-cpp-python is not installed")
    return Path(spec.origin).parent / "lib"


def cpu_variants(lib_dir: Path) -> list[str]:
    """The CPU variants built into this folder, by file name (empty: no GGML_BACKEND_DL)."""
    names = (p.name for p in lib_dir.glob(f"{_CPU_PREFIX}*{_MODULE_SUFFIX}"))
    return sorted(n[len(_CPU_PREFIX) : -len(_MODULE_SUFFIX)] for n in names)


_lock = threading.Lock()
_loaded: Backends | None = None


def load_backends(cpu_variant: str = AUTO, lib_dir: Path | None = None) -> Backends:
    """Load ggml's backends once per process (the best CPU variant, or `cpu_variant` by name)
    and say what runs. Raises BackendError when no CPU backend runs here, when the named variant
    is not built or cannot run on this CPU, or when another variant is loaded already."""
    global _loaded
    with _lock:
        if _loaded is None:
            folder = lib_dir or library_dir()
            ggml = _ggml(folder)
            if ggml.ggml_backend_reg_count() == 0:  # modules: nothing registered itself
                _load_modules(ggml, folder, cpu_variant)
            elif cpu_variant not in (AUTO, BUILTIN):
                raise BackendError(f"this build has no CPU variants (asked: {cpu_variant})")
            _loaded = _describe(ggml, folder)
        if cpu_variant not in (AUTO, _loaded.cpu_variant):
            raise BackendError(
                f"CPU variant {_loaded.cpu_variant} is loaded already (asked: {cpu_variant})"
            )
        return _loaded


def _load_modules(ggml: ctypes.CDLL, folder: Path, cpu_variant: str) -> None:
    built = cpu_variants(folder)
    if cpu_variant == AUTO:
        ggml.ggml_backend_load_all_from_path(str(folder).encode())
    else:
        if cpu_variant not in built:
            raise BackendError(
                f"no CPU variant {cpu_variant!r} in {folder} (built: {', '.join(built) or 'none'})"
            )
        for module in sorted(folder.glob(f"libggml-*{_MODULE_SUFFIX}")):
            if not module.name.startswith((_CPU_PREFIX, "libggml-base")):
                ggml.ggml_backend_load(str(module).encode())  # a GPU backend, BLAS, RPC
        path = folder / f"{_CPU_PREFIX}{cpu_variant}{_MODULE_SUFFIX}"
        if not ggml.ggml_backend_load(str(path).encode()):  # its score is 0 on this CPU
            raise BackendError(f"CPU variant {cpu_variant} cannot run on this CPU")
    if not any(_reg_name(ggml, r) == "CPU" for r in _regs(ggml)):
        raise BackendError(
            f"no CPU backend in {folder} runs on this CPU (built: {', '.join(built) or 'none'})"
        )


def _describe(ggml: ctypes.CDLL, folder: Path) -> Backends:
    variant, features = BUILTIN, ()
    for reg in _regs(ggml):
        if _reg_name(ggml, reg) == "CPU":
            variant = _module_variant(reg) or BUILTIN
            features = _features(ggml, reg)
    devices = []
    for i in range(ggml.ggml_backend_dev_count()):
        dev = ggml.ggml_backend_dev_get(i)
        devices.append(
            ComputeDevice(
                ggml.ggml_backend_dev_name(dev).decode(),
                ggml.ggml_backend_dev_description(dev).decode("utf-8", "replace").strip(),
                _DEVICE_KINDS.get(ggml.ggml_backend_dev_type(dev), "other"),
            )
        )
    return Backends(variant, features, tuple(devices), str(folder))


# --- ctypes ------------------------------------------------------------------------------------


class _Feature(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_char_p)]


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _ggml_file(folder: Path) -> Path:
    """The file libllama links to by its soname (libggml.so.0): in a wheel the other names are
    copies, not links, and the loader would map a copy as a second libggml with a registry of its
    own, where libllama finds no backend."""
    sonamed = sorted(folder.glob("libggml.so.*"), key=lambda p: len(p.name))
    sonamed += sorted(folder.glob("libggml.*.dylib"), key=lambda p: len(p.name))
    plain = [folder / n for n in ("libggml.so", "libggml.dylib", "ggml.dll")]
    for path in [*sonamed, *plain]:
        if path.exists():
            return path
    raise BackendError(f"no libggml in {folder}")


def _ggml(folder: Path) -> ctypes.CDLL:
    """libggml with the signatures used here (its handle also finds libggml-base's symbols)."""
    lib = ctypes.CDLL(str(_ggml_file(folder)))
    ptr, size, text = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
    signatures = {
        "ggml_backend_reg_count": ([], size),
        "ggml_backend_reg_get": ([size], ptr),
        "ggml_backend_reg_name": ([ptr], text),
        "ggml_backend_reg_get_proc_address": ([ptr, text], ptr),
        "ggml_backend_load": ([text], ptr),
        "ggml_backend_load_all_from_path": ([text], None),
        "ggml_backend_dev_count": ([], size),
        "ggml_backend_dev_get": ([size], ptr),
        "ggml_backend_dev_name": ([ptr], text),
        "ggml_backend_dev_description": ([ptr], text),
        "ggml_backend_dev_type": ([ptr], ctypes.c_int),
    }
    for name, (args, result) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, result
    return lib


def _regs(ggml: ctypes.CDLL) -> list[int]:
    return [ggml.ggml_backend_reg_get(i) for i in range(ggml.ggml_backend_reg_count())]


def _reg_name(ggml: ctypes.CDLL, reg: int) -> str:
    return ggml.ggml_backend_reg_name(reg).decode()


def _features(ggml: ctypes.CDLL, reg: int) -> tuple[str, ...]:
    address = ggml.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_get_features")
    if not address:
        return ()
    get = ctypes.CFUNCTYPE(ctypes.POINTER(_Feature), ctypes.c_void_p)(address)
    found, table = [], get(reg)
    for i in range(64):  # the table ends with a NULL name
        if table[i].name is None:
            break
        if table[i].value == b"1":
            found.append(table[i].name.decode())
    return tuple(found)


def _module_variant(reg: int) -> str | None:
    """The variant of the module the registry object lives in (dladdr names its file)."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except AttributeError:  # glibc before 2.34 keeps it in libdl
        dladdr = ctypes.CDLL("libdl.so.2").dladdr
    info = _DlInfo()
    if not dladdr(ctypes.c_void_p(reg), ctypes.byref(info)) or not info.dli_fname:
        return None
    name = Path(info.dli_fname.decode()).name
    if not name.startswith(_CPU_PREFIX):
        return None
    return name[len(_CPU_PREFIX) :].split(_MODULE_SUFFIX)[0]


def main() -> int:
    """`python -m mm.ggml_backends [LIB_DIR] [VARIANT]`: load and print what runs here."""
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    variant = sys.argv[2] if len(sys.argv) > 2 else AUTO
    try:
        backends = load_backends(variant, folder)
    except BackendError as e:
        print(f"ggml_backends: {e}", file=sys.stderr)
        return 1
    print(backends.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
