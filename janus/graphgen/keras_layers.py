"""User-defined Keras layers and models: their ``call`` is converted, Keras's ``__call__`` runs.

Calling a Keras layer runs Keras's own ``__call__`` (library code: name scopes, autocast,
the ``training`` flag's propagation, masking), which then calls ``self.call``. For a layer
whose ``call`` is user code, janus installs a shim on the instance for the duration of the
library call: Keras calls the shim, and the shim converts the user's ``call`` from its AST.
So Keras's semantics are kept and the user's code never runs while a graph is built. The
same happens for user layers nested anywhere inside a library model (Sequential, functional).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import types
from collections.abc import Callable, Iterator

from janus.source.library import is_library_code

_MISSING = object()


def is_keras_layer(obj: object) -> bool:
    return _is_layer_class(type(obj))


@functools.lru_cache(maxsize=4096)  # guards ask on every call
def _is_layer_class(cls: type) -> bool:
    return any(k.__name__ == "Layer" and k.__module__.split(".")[0] in ("keras", "tf_keras") for k in cls.__mro__)


def is_library_call_of_layer(callee: object) -> bool:
    """``super().call`` in a user layer: a Keras layer class's own ``call``, bound to the user's layer.
    It runs as Keras's ``__call__`` would run it (the user's overrides it reaches are refused)."""
    func = getattr(callee, "__func__", None)
    return (
        isinstance(callee, types.MethodType)
        and func.__name__ == "call"
        and is_library_code(func.__code__)
        and is_keras_layer(callee.__self__)
    )


def is_keras_object(obj: object) -> bool:
    """A Keras layer, model, optimizer, loss or metric (Keras 3 or tf_keras)."""
    module = type(obj).__module__ or ""
    return module.split(".")[0] in ("keras", "tf_keras") and not isinstance(obj, type)


def objects_within(obj: object) -> list[object]:
    """``obj`` and, for a layer or model, every layer within it."""
    return _layers_within(obj) if is_keras_layer(obj) else [obj]


def user_call(layer: object) -> types.FunctionType | None:
    """The user-written ``call`` of a Keras layer instance, if its class defines one."""
    impl = inspect.getattr_static(type(layer), "call", None)
    if isinstance(impl, types.FunctionType) and not is_library_code(impl.__code__):
        return impl
    return None


def _layers_within(root: object) -> list[object]:
    layers = [root]
    flatten = getattr(root, "_flatten_layers", None)
    if flatten is not None:
        layers += list(flatten(include_self=False))
    return layers


@contextlib.contextmanager
def converted_calls(
    root: object, convert: Callable[[types.FunctionType, list, dict], object]
) -> Iterator[list[tuple[object, types.FunctionType]]]:
    """Installs conversion shims on every user layer within ``root``; yields (layer, call) pairs."""
    installed: list[tuple[object, object]] = []
    converted: list[tuple[object, types.FunctionType]] = []
    try:
        for layer in _layers_within(root) if is_keras_layer(root) else []:
            fn = user_call(layer)
            for name, value in list(getattr(layer, "__dict__", {}).items()) if fn is None else ():
                if isinstance(value, types.FunctionType) and not is_library_code(value.__code__) and name != "call":
                    # Dense(activation=gelu): Keras calls the user function; the shim converts it (a user
                    # layer's own call reads such attributes itself, converted)
                    installed.append((layer, name, value))
                    object.__setattr__(layer, name, _shim(value, None, convert))
            if fn is None or "call" in getattr(layer, "__dict__", {}) and layer.__dict__["call"].__name__ == "shim":
                continue

            installed.append((layer, "call", layer.__dict__.get("call", _MISSING)))
            converted.append((layer, fn))
            object.__setattr__(layer, "call", _shim(fn, layer, convert))
        yield converted
    finally:
        for layer, name, previous in reversed(installed):
            if previous is _MISSING:
                object.__delattr__(layer, name)
            else:
                object.__setattr__(layer, name, previous)


def _shim(fn: types.FunctionType, owner: object, convert: Callable) -> Callable:
    """What Keras calls instead of user function ``fn`` (a method of ``owner``, if given): its
    conversion, in the thread that generates; another thread calling the same layer meanwhile
    gets the user's own function, as if no shim were there."""
    generating = threading.get_ident()

    def shim(*args: object, **kwargs: object) -> object:
        if threading.get_ident() != generating:
            return fn(owner, *args, **kwargs) if owner is not None else fn(*args, **kwargs)
        return convert(fn, [owner, *args] if owner is not None else list(args), kwargs)

    shim.__name__ = "shim"
    return shim
