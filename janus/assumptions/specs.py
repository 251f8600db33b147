"""Argument specialisations, derived from profiled observations and past failures.

The hierarchy follows the paper's Fig. 4: a tensor is specialised on its value (small
tensors only), then its exact shape, then a partially known shape, then unknown rank.
Python scalars are specialised on their value (a float that keeps failing is relaxed to
its type); objects on their identity.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from janus.graphgen.datasets import DatasetKind, common_spec, is_dataset, kind_of
from janus.graphgen.values import is_user_object
from janus.profiler.observe import ObjectObs, Observation, ScalarObs, SeqObs, TensorObs


@dataclasses.dataclass(frozen=True, eq=False)
class TensorArg:
    dtype: tf.DType
    shape: tuple[int | None, ...] | None
    value: np.ndarray | None = None  # speculated constant value, checked by a JanusAssert


@dataclasses.dataclass(frozen=True, eq=False)
class ConstArg:
    type: type
    value: object


@dataclasses.dataclass(frozen=True, eq=False)
class NumberArg:
    """A Python float (int, bool) relaxed from its value to its type: fed as a float64 (int64,
    bool) scalar. A bool that flips between calls becomes one (its ``if`` a ``tf.cond``) until the
    code uses it where only a constant can go (``:constant`` failed)."""

    type: type


@dataclasses.dataclass(frozen=True, eq=False)
class ObjectArg:
    obj: object


@dataclasses.dataclass(frozen=True, eq=False)
class DatasetArg:
    """A ``tf.data.Dataset``: fed as its variant tensor, so a new dataset each call (another epoch's
    pipeline) costs no new graph. Guarded on its element spec (the profiled ones' common spec) and
    on what its iteration does besides producing elements (``datasets.DatasetKind``)."""

    spec: tf.data.DatasetSpec
    kind: DatasetKind


@dataclasses.dataclass(frozen=True, eq=False)
class PointerArg:
    """A user object that was a different object at every profiled call (a data structure such
    as a parse tree), or a list of such objects (a batch of trees): passed as an int64 pointer
    that the call's store resolves, read through the heap ops, so a new object (a batch of
    another size) costs no new graph. ``samples`` are the objects (lists) profiled: they type its
    attributes (items); the lists' lengths bound loops over them."""

    cls: type
    samples: list


@dataclasses.dataclass(frozen=True, eq=False)
class LazyListArg:
    """A list argument whose length changed between profiled calls (a loss history the step
    appends to): guarded on its type only. Appends are logged and replayed on the caller's list;
    code that reads the contents makes the next graph take the items one by one (``SeqArg``)."""


@dataclasses.dataclass(frozen=True, eq=False)
class SeqArg:
    type: type
    items: tuple
    keys: tuple | None = None  # for dicts


@dataclasses.dataclass(frozen=True, eq=False)
class UnusedArg:
    """An argument the graph must not read (``janus.partial.recompute``'s prefix graph): no guard,
    and converted code that reads it is refused."""


ArgSpec = TensorArg | ConstArg | NumberArg | ObjectArg | DatasetArg | PointerArg | LazyListArg | SeqArg | UnusedArg


def merge_shapes(shapes: Sequence[tuple | None]) -> tuple | None:
    """The most specific shape that admits every one of ``shapes``."""
    if any(s is None for s in shapes) or len({len(s) for s in shapes}) != 1:
        return None
    return tuple(dims[0] if len(set(dims)) == 1 else None for dims in zip(*shapes))


def item_key(key: str, label: object) -> str:
    """The assumption key of an item: ``argument d['k']@file:line`` (as the guards name it)."""
    what, _, loc = key.rpartition("@")
    return f"{what}[{label!r}]@{loc}"


def derive(
    observations: Sequence[Observation],
    path: str,
    failures: Callable[[str], int],
    max_failures: int,
    exact_shapes: bool = False,
) -> ArgSpec:
    """The specialisation of one argument, given every observation of it so far.

    The newest observation always fits the result. ``failures(key)`` counts past
    failures of an assumption key, so a value that keeps failing is not specialised again.
    """
    latest = observations[-1]
    same_kind = [o for o in observations if type(o) is type(latest)]
    if isinstance(latest, TensorObs):
        alike = [o for o in same_kind if o.dtype == latest.dtype]
        shape = latest.shape if exact_shapes else merge_shapes([o.shape for o in alike])
        constant = (
            latest.value is not None and failures(f"{path}:value") == 0 and all(latest.same_value(o) for o in alike)
        )
        return TensorArg(latest.dtype, shape, latest.value if constant else None)
    if isinstance(latest, ScalarObs) and latest.type is bool and failures(f"{path}:constant") == 0:
        both = {o.value for o in same_kind if o.type is bool} == {True, False}
        if both or failures(f"{path}:value"):  # train/eval, seen both ways: fed at run time
            return NumberArg(bool)
    if isinstance(latest, ScalarObs):
        relaxable = latest.type is float or latest.type is int and abs(latest.value) < 2**31
        if relaxable and failures(f"{path}:value") >= max_failures:
            return NumberArg(latest.type)
        return ConstArg(latest.type, latest.value)
    if isinstance(latest, SeqObs) and failures(f"{path}:pointer") == 0 and _fresh_object_lists(same_kind):
        return PointerArg(list, [[i.obj for i in o.items] for o in same_kind])
    if isinstance(latest, SeqObs) and latest.type is list and failures(f"{path}:contents") == 0:
        lists = [o for o in same_kind if o.type is list]
        if len({len(o.items) for o in lists}) > 1:
            return LazyListArg()
    if isinstance(latest, SeqObs):
        same = [
            o
            for o in same_kind
            if o.type is latest.type and o.keys == latest.keys and len(o.items) == len(latest.items)
        ]
        labels = latest.keys if latest.keys is not None else range(len(latest.items))
        items = tuple(
            derive([o.items[i] for o in same], item_key(path, label), failures, max_failures, exact_shapes)
            for i, label in enumerate(labels)
        )
        return SeqArg(latest.type, items, latest.keys)
    assert isinstance(latest, ObjectObs)
    objects = [o.obj for o in same_kind]
    if is_dataset(latest.obj):
        return DatasetArg(common_spec([o for o in objects if is_dataset(o)]), kind_of(latest.obj))
    fresh = len({id(o) for o in objects}) == len(objects) > 1
    if fresh and len({type(o) for o in objects}) == 1 and is_user_object(latest.obj) and not callable(latest.obj):
        return PointerArg(type(latest.obj), objects[::-1])  # the newest first
    return ObjectArg(latest.obj)


def _fresh_object_lists(observations: Sequence[Observation]) -> bool:
    """Lists of data objects (one user class, not callable) that were other objects at every
    profiled call: a batch of trees travels as one pointer, whatever its length."""
    if len(observations) < 2 or any(o.type is not list or o.keys is not None for o in observations):
        return False
    items = [item for o in observations for item in o.items]
    if not items or not all(isinstance(i, ObjectObs) for i in items):
        return False
    classes = {type(i.obj) for i in items}
    sample = items[0].obj
    if len(classes) != 1 or not is_user_object(sample) or callable(sample):
        return False
    return len({id(i.obj) for i in items}) == len(items)  # no object seen twice: fresh data each call


def list_pointer_keys(spec: ArgSpec, key: str) -> list[str]:
    """The assumption keys of the lists in ``spec`` (``key`` names the argument) taken whole, by
    pointer or unread: where the code needs their items one by one, they go back to one input per item."""
    if isinstance(spec, PointerArg) and spec.cls is list:
        return [f"{key}:pointer"]
    if isinstance(spec, LazyListArg):
        return [f"{key}:contents"]
    if isinstance(spec, SeqArg):
        labels = spec.keys if spec.keys is not None else range(len(spec.items))
        return [k for label, item in zip(labels, spec.items) for k in list_pointer_keys(item, item_key(key, label))]
    return []
