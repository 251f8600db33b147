"""What a value's text may show, found without running any of the value's own code.

A deferred call (``print``, logging) formats its arguments after the graph ran, and a graph
``tf.print`` formats its Python arguments once, when the graph is built; eager formats them at the
call. Either is eager's text only where the text cannot show what changes in between: janus looks
through an argument to the values its text shows (a container's items, a dataclass's fields) and
refuses where it cannot tell. An allow-list: text of user code, or of a library type not listed
here, counts as showing anything.
"""

from __future__ import annotations

import collections
import collections.abc
import itertools
import types
from collections.abc import Callable, Iterable

import numpy as np
import tensorflow as tf

from janus.graphgen.heap import HeapList

MAX_ITEMS = 10_000  # values looked through; a larger structure counts as showing anything

# Types whose text depends only on an immutable value (a tensor's, for a tensor).
_LEAVES = (
    str,
    bytes,
    int,
    float,
    complex,
    bool,
    type(None),
    type(Ellipsis),
    range,
    tf.Tensor,
    tf.__internal__.CompositeTensor,
    tf.DType,
    tf.TensorShape,
    np.generic,
    np.dtype,
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.ModuleType,
)

# Library containers whose text shows their items and nothing else.
_ITEM_TYPES = (
    list,
    tuple,
    set,
    frozenset,
    dict,
    collections.OrderedDict,
    collections.defaultdict,
    collections.Counter,
    collections.deque,
)
_ITERATIONS = (list, tuple, set, frozenset, collections.deque)  # read by their own __iter__

_TEXT_METHODS = ("__repr__", "__str__", "__format__")
_NAMEDTUPLE_REPR = collections.namedtuple("_Probe", "a").__repr__.__code__  # every namedtuple's


def shown(value: object) -> list | None:
    """The values ``value``'s text shows: a container's items (a dict's keys and values), a
    dataclass's or ``SimpleNamespace``'s attributes; none for a leaf or for object's own text (its
    type and address); None where that cannot be told without running its code."""
    if isinstance(value, HeapList):
        value = value.real  # a list attribute, as the call found it
    cls = type(value)
    if issubclass(cls, _LEAVES) or cls.__module__.startswith("janus."):
        return []  # janus's own stand-ins are checked by their own rules
    if issubclass(cls, np.ndarray):
        return [] if value.dtype != object else None
    if cls is types.MethodType:
        return [value.__self__]  # "<bound method C.f of {self!r}>"
    kind = _text_kind(cls)
    if kind == "items":
        return _items(value)
    if kind == "fields":
        return _instance_attributes(value)
    return [] if kind == "own" else None


def held(value: object) -> list | None:
    """The values a container holds, listed by its base type's own iteration (a dict's keys and
    values), a composite tensor's components; none for another object; None for a container of
    user code (a ``Mapping`` or ``Sequence`` not built on a builtin one), which would run to list them."""
    cls = type(value)
    if issubclass(cls, _LEAVES) and not issubclass(cls, tf.__internal__.CompositeTensor):
        return []
    if issubclass(cls, tf.__internal__.CompositeTensor):
        return tf.nest.flatten(value, expand_composites=True)
    items = _items(value)
    if items is not None:
        return items
    if issubclass(cls, (collections.abc.Mapping, collections.abc.Collection)):
        return None
    return []


def reaches(
    value: object,
    found: Callable[[object], bool],
    inside: Callable[[object], list | None] | None = None,
    unknown: bool = True,
) -> bool:
    """Whether ``value`` shows something ``found`` in its text (or, with ``inside=held``, holds
    one): it, or a value looked through to, each once; ``unknown`` where that cannot be told."""
    inside = inside or shown
    pending, seen = [value], set()
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if found(item):
            return True
        looked_through = inside(item)
        if looked_through is None or len(seen) > MAX_ITEMS:
            if unknown:
                return True
            continue
        pending.extend(looked_through)
    return False


def _text_kind(cls: type) -> str:
    """``"own"`` (object's text), ``"items"``, ``"fields"``, or ``"unknown"``."""
    kinds = set()
    for name in _TEXT_METHODS:
        method = getattr(cls, name, None)
        if method is getattr(object, name):
            continue
        if (
            any(method is getattr(t, name) for t in _ITEM_TYPES)
            or getattr(method, "__code__", None) is _NAMEDTUPLE_REPR
        ):
            kinds.add("items")
        elif method is getattr(types.SimpleNamespace, name) or _is_dataclass_repr(method):
            kinds.add("fields")
        else:
            return "unknown"
    if len(kinds) > 1:
        return "unknown"
    return kinds.pop() if kinds else "own"


def _is_dataclass_repr(method: object) -> bool:
    """A ``__repr__`` that ``dataclasses`` wrote: it shows the fields, read as attributes."""
    return getattr(getattr(method, "__wrapped__", None), "__qualname__", "") == "__create_fn__.<locals>.__repr__"


def _items(value: object) -> list | None:
    cls = type(value)
    if issubclass(cls, dict):
        return _at_most(itertools.chain(dict.keys(value), dict.values(value)))
    for base in _ITERATIONS:
        if issubclass(cls, base):
            return _at_most(base.__iter__(value))
    return None


def _instance_attributes(value: object) -> list | None:
    """An object's ``__dict__`` and slot values, read without running its code."""
    try:
        attributes = object.__getattribute__(value, "__dict__")
    except AttributeError:
        attributes = {}
    if type(attributes) is not dict:
        return None
    found = _at_most(dict.values(attributes))
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            slot = cls.__dict__.get(name)
            if isinstance(slot, types.MemberDescriptorType) and found is not None:
                try:
                    found.append(slot.__get__(value))
                except AttributeError:
                    continue  # an unset slot
    return found


def _at_most(items: Iterable) -> list | None:
    """``items`` as a list, or None where there are more than ``MAX_ITEMS``."""
    listed = list(itertools.islice(items, MAX_ITEMS + 1))
    return None if len(listed) > MAX_ITEMS else listed
