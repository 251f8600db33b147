"""Builds and loads janus's C++ ops (``csrc/*.cc``) against the installed TensorFlow.

The shared library is compiled on first use into a cache directory keyed by the
TensorFlow version and a hash of the sources, so a TF upgrade or an edited
kernel triggers a rebuild and nothing else does. ``python -m janus.ops`` builds ahead of
time (the Makefile does this). ``ops()`` builds at most once per process: a failure is
reported once, and every function then runs imperatively with that reason.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType

import tensorflow as tf

from janus.diagnostics import logs

log = logs.logger("builds")


class OpBuildError(RuntimeError):
    """The C++ ops could not be compiled or loaded; the message says what to do."""


_loaded: ModuleType | None = None
_failure: OpBuildError | None = None
_lock = threading.Lock()
build_seconds = 0.0  # spent compiling in this process (not graph build time)


def ops() -> ModuleType:
    """The op module: loaded (compiled on first use) once per process; a failure is remembered."""
    global _loaded, _failure, build_seconds
    if _loaded is not None:
        return _loaded
    with _lock:
        if _failure is not None:
            raise _failure
        if _loaded is None:
            started = time.perf_counter()
            try:
                _loaded = load()
            except OpBuildError as err:
                _failure = err
                log.warning("its C++ ops are unavailable, so every function runs imperatively: %s", err)
                raise
            finally:
                build_seconds += time.perf_counter() - started
    return _loaded


def source_dir() -> Path:
    """Where the kernel sources live: ``csrc/`` of a checkout, or the installed copy."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent.parent / "csrc", here / "csrc"):
        if candidate.is_dir() and any(candidate.glob("*.cc")):
            return candidate
    raise OpBuildError(
        f"janus cannot find its C++ sources (looked in {here.parent.parent / 'csrc'} and "
        f"{here / 'csrc'}). Reinstall janus from a complete checkout."
    )


def cache_dir() -> Path:
    root = os.environ.get("JANUS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "janus"
    )
    return Path(root)


def _library_path(sources: list[Path]) -> Path:
    digest = hashlib.sha256()
    for src in sources:
        digest.update(src.name.encode())
        digest.update(src.read_bytes())
    digest.update(" ".join(tf.sysconfig.get_compile_flags()).encode())
    digest.update(sysconfig.get_paths()["include"].encode())
    tag = f"tf{tf.__version__}-py{sys.version_info.major}{sys.version_info.minor}-{digest.hexdigest()[:16]}"
    return cache_dir() / tag / "janus_ops.so"


def _compile(sources: list[Path], target: Path) -> None:
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        raise OpBuildError(
            "janus needs a C++17 compiler to build its TensorFlow ops, and none was found "
            "(looked for $CXX, g++, c++). Install one, e.g. `apt-get install g++`, then retry."
        )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # Build into a temporary file and rename, so concurrent processes never load a half-written .so.
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(fd)
    except OSError as err:
        raise OpBuildError(
            f"janus cannot write its op cache {target.parent} ({type(err).__name__}: {err}). "
            "Set JANUS_CACHE_DIR to a writable directory."
        ) from err
    log.warning("compiling its C++ ops for TensorFlow %s (first use, about a minute; "
                "`python -m janus.ops` does it ahead of time)", tf.__version__)  # fmt: skip
    cmd = [
        compiler,
        "-shared",
        "-fPIC",
        "-O2",
        *map(str, sources),
        "-o",
        tmp,
        f"-I{sysconfig.get_paths()['include']}",  # Python.h: the heap ops call back into Python
        *tf.sysconfig.get_compile_flags(),
        *tf.sysconfig.get_link_flags(),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as err:
        os.unlink(tmp)
        raise OpBuildError(
            f"janus cannot run the C++ compiler {compiler!r} ({type(err).__name__}: {err}). "
            "Install a C++17 compiler (e.g. `apt-get install g++`) or point $CXX at one."
        ) from err
    if proc.returncode != 0:
        os.unlink(tmp)
        raise OpBuildError(
            "janus could not compile its C++ ops against TensorFlow "
            f"{tf.__version__}.\nCommand: {' '.join(cmd)}\n{_errors_first(proc.stderr)}\n"
            "Check that the compiler supports C++17 and that TensorFlow's headers are intact "
            "(`pip install --force-reinstall tensorflow-cpu`)."
        )
    os.replace(tmp, target)


def load() -> ModuleType:
    """Returns the loaded op module, compiling it first if the cache has no build."""
    sources = sorted(source_dir().glob("*.cc"))
    target = _library_path(sources)
    if not target.exists():
        _compile(sources, target)
    try:
        return tf.load_op_library(str(target))
    except tf.errors.NotFoundError as err:
        raise OpBuildError(
            f"janus's op library {target} does not load into TensorFlow {tf.__version__} "
            f"(ABI mismatch?): {err}. Delete {target.parent} to force a rebuild."
        ) from err


def _errors_first(stderr: str, limit: int = 4000) -> str:
    """The compiler's error lines (TensorFlow's headers bury them under deprecation warnings), then its
    output's tail."""
    errors = "\n".join(line for line in stderr.splitlines() if ": error:" in line)
    return f"{errors[:limit]}\n...\n{stderr[-limit:]}" if errors else stderr[-limit:]
