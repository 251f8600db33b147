"""What counts as library code (executed on symbolic tensors) versus user code (converted).

User code is never executed while a graph is built; library code (TensorFlow, Keras,
NumPy, the standard library) is, because its behaviour on symbolic tensors is known.
"""

from __future__ import annotations

import functools
import inspect
import os
import sysconfig
import types

_JANUS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARY_MODULE_ROOTS = frozenset(
    {"tensorflow", "keras", "tf_keras", "numpy", "builtins", "math", "operator", "functools"}
)


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.add(os.path.realpath(_JANUS_DIR))
    return tuple(sorted(d + os.sep for d in dirs))


@functools.cache
def is_library_file(filename: str) -> bool:
    """True for files of installed packages, the standard library and janus itself."""
    if not filename or filename.startswith("<"):
        return filename.startswith("<frozen")
    return os.path.realpath(filename).startswith(_library_dirs())


def is_library_code(code: types.CodeType) -> bool:
    return is_library_file(code.co_filename)


def is_user_function(obj: object) -> bool:
    """A Python function (or method of one) written by the user, to be converted.

    Only methods are looked through: ``getattr(obj, "__func__")`` would run a user class's
    ``__getattr__`` while generating."""
    func = obj.__func__ if isinstance(obj, (types.MethodType, staticmethod, classmethod)) else obj
    return isinstance(func, types.FunctionType) and not is_library_code(func.__code__)


def _module_root(obj: object) -> str:
    module = getattr(obj, "__module__", None) or ""
    return module.split(".", 1)[0]


def is_library_object(obj: object) -> bool:
    """Modules, functions, classes and instances that belong to a library."""
    if isinstance(obj, types.ModuleType):
        file = getattr(obj, "__file__", None)
        return file is None or is_library_file(file)
    if isinstance(obj, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        owner = getattr(obj, "__self__", None)
        return owner is None or isinstance(owner, types.ModuleType) or is_library_object(owner)
    if isinstance(obj, types.MethodType):
        return is_library_object(obj.__func__) and is_library_object(obj.__self__)
    if isinstance(obj, types.FunctionType):
        return is_library_code(obj.__code__)
    cls = obj if isinstance(obj, type) else type(obj)
    return is_library_class(cls)


@functools.cache
def is_library_class(cls: type) -> bool:
    """A class whose own code (and every class in its MRO) is library code."""
    for klass in cls.__mro__:
        if _module_root(klass) in _LIBRARY_MODULE_ROOTS:
            continue
        file = _class_file(klass)
        if file is not None and not is_library_file(file):
            return False
    return True


def _class_file(klass: type) -> str | None:
    """The file defining ``klass``; None for builtin types. A class whose module is not in
    ``sys.modules`` (loaded by ``importlib`` from a path) is found through its methods' code."""
    try:
        return inspect.getfile(klass)
    except (TypeError, OSError):
        pass
    for value in vars(klass).values():
        code = getattr(getattr(value, "__func__", value), "__code__", None)
        if isinstance(code, types.CodeType):
            return code.co_filename
    return None
