"""What a Keras object's ops depend on besides its inputs and variables, and the guard that re-checks it.

A graph that ran Keras code while generating read the Python settings of the layers it called
(``trainable``, ``momentum``, ``rate``, an activation function) and Keras's global settings.
``state_fingerprint`` is that state as a value; ``StateCheck`` tells before each call whether it
is unchanged. The fingerprint reads every attribute of every layer within a model (Inception-v3:
314 layers of about 60 attributes, 9 ms a call in Python): ``StateCheck`` first compares each
layer's attributes with their layout while generating (their count, the kept settings and
functions by identity, the types of the other values and of their tuples' items), picked by name
with a few C-level operations, and computes the fingerprint only where that layout changed. Its
answer is always the fingerprint's.
"""

from __future__ import annotations

import functools
import operator
import sys
import types
from collections.abc import Callable

import numpy as np

from janus.graphgen.keras_layers import objects_within

_SETTING_TYPES = (bool, int, float, str, bytes, type(None), np.generic)
_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, functools.partial)
_SETTING, _TUPLE, _FUNCTION, _OTHER = 1, 2, 3, 4
# type -> what _settings keeps of a value of that type: guards call it on every call, per attribute
_KINDS: dict[type, int] = {}
_MAX_KINDS = 10_000  # classes made at run time, one per call, must not grow it for ever


def _kind(cls: type) -> int:
    kind = _KINDS.get(cls)
    if kind is None:
        if issubclass(cls, _SETTING_TYPES):
            kind = _SETTING
        elif cls is tuple:
            kind = _TUPLE
        elif issubclass(cls, _FUNCTION_TYPES):
            kind = _FUNCTION
        else:
            kind = _OTHER
        if len(_KINDS) >= _MAX_KINDS:
            _KINDS.clear()
        _KINDS[cls] = kind
    return kind


def _is_setting_tuple(value: tuple) -> bool:
    return all(_kind(type(v)) == _SETTING for v in value)


def _settings(obj: object) -> tuple:
    """The Python settings a Keras object reads while it builds ops (``trainable``, ``momentum``,
    ``epsilon``, ``clipnorm``, ``rate``, ``reduction``, its activation function): plain values by
    type and value, functions by identity."""
    out = []
    kinds = _KINDS
    for name, value in vars(obj).items():
        kind = kinds.get(type(value)) or _kind(type(value))
        if kind == _SETTING:
            out.append((name, type(value), value))
        elif kind == _TUPLE and _is_setting_tuple(value):
            out.append((name, tuple, tuple([(type(v), v) for v in value])))
        elif kind == _FUNCTION:
            out.append((name, _FUNCTION, id(value)))
    out.sort(key=operator.itemgetter(0))  # Keras re-adds some attributes: order varies
    return tuple(out)


def config() -> tuple:
    """Keras's global settings (``epsilon()``, ``floatx()``, ``image_data_format()``) in force."""
    out = []
    for name in ("keras", "tf_keras"):
        backend = getattr(sys.modules.get(name), "backend", None)
        if backend is not None and hasattr(backend, "epsilon"):
            out.append((name, backend.epsilon(), backend.floatx(), backend.image_data_format()))
    return tuple(out)


def state_fingerprint(obj: object) -> tuple:
    """What a Keras object's ops depend on besides its inputs, its variables and Keras's global
    settings (``config``, guarded once per graph): the layers within it (a block appended to a
    model) and every one's settings (a GAN freezing its discriminator, a frozen BatchNormalization,
    a changed ``Dropout.rate`` or ``clipnorm``). Compared as a whole."""
    return tuple([(id(sub), _settings(sub)) for sub in objects_within(obj)])


class StateCheck:
    """``state_fingerprint(obj) == expected`` for the object it was made from, decided quickly
    where no layer's attributes changed their layout (module docstring)."""

    __slots__ = ("expected", "_ids", "_layouts")

    def __init__(self, obj: object) -> None:
        layers = objects_within(obj)
        self.expected = tuple([(id(sub), _settings(sub)) for sub in layers])
        self._ids = tuple(map(id, layers))
        self._layouts = tuple(_Layout(vars(sub)) for sub in layers)  # holds the kept values

    def __call__(self, obj: object) -> bool:
        layers = objects_within(obj)
        if tuple(map(id, layers)) == self._ids and all(map(_Layout.unchanged, self._layouts, layers)):
            return True
        return state_fingerprint(obj) == self.expected


class _Layout:
    """One object's attributes as ``_settings`` saw them: the settings it kept (held, compared by
    identity), the functions it kept (held, by identity), and the type of every other value (and
    of each item of a tuple value, which decides whether the tuple is a setting). The same names,
    identical kept values and the same other types give equal settings."""

    __slots__ = ("count", "pick_kept", "kept", "kept_ids", "pick_others", "other_types", "tuples")

    def __init__(self, attrs: dict) -> None:
        self.count = len(attrs)
        kept = [n for n, v in attrs.items() if _kind(type(v)) in (_SETTING, _FUNCTION) or _is_kept_tuple(v)]
        kept_names = frozenset(kept)
        others = [n for n in attrs if n not in kept_names]
        self.pick_kept = _picker(kept)
        self.kept = self.pick_kept(attrs)  # held: their ids stay theirs
        self.kept_ids = tuple(map(id, self.kept))
        self.pick_others = _picker(others)
        self.other_types = tuple(map(type, self.pick_others(attrs)))
        self.tuples = tuple((n, tuple(map(type, attrs[n]))) for n in others if type(attrs[n]) is tuple)

    def unchanged(self, obj: object) -> bool:
        attrs = vars(obj)
        if len(attrs) != self.count:
            return False
        try:
            if tuple(map(id, self.pick_kept(attrs))) != self.kept_ids:
                return False
            if tuple(map(type, self.pick_others(attrs))) != self.other_types:
                return False
        except KeyError:  # an attribute was removed (and another added)
            return False
        return all(tuple(map(type, attrs[n])) == item_types for n, item_types in self.tuples)


def _is_kept_tuple(value: object) -> bool:
    return type(value) is tuple and _is_setting_tuple(value)


def _picker(keys: list[str]) -> Callable[[dict], tuple]:
    """A function from a dict to the tuple of its values at ``keys`` (none or one included)."""
    if not keys:
        return lambda attrs: ()
    if len(keys) == 1:
        key = keys[0]
        return lambda attrs: (attrs[key],)
    return operator.itemgetter(*keys)
