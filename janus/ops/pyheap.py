"""The Python side of the heap ops (``JanusPyGetAttr`` & co.): per-call stores of local copies.

A graph that reads or writes Python objects known only at run time gets a ``CallStore``
for each call. Objects enter the graph as int64 pointers the store registered (the kernels
never dereference a pointer: they ask the store, which refuses unknown ones). Reads return
the store's local copy of a location if the call wrote one, else the heap value, after
checking it has the type and shape the graph was specialised on (otherwise the assumption
fails and the call re-runs eagerly). Writes go to the store; ``commit`` replays them in
program order after the whole graph succeeded.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading

import numpy as np
import tensorflow as tf
from tensorflow.python.framework.ops import EagerTensor

_stores: dict[int, CallStore] = {}
_expectations: dict[int, Expectation] = {}
_ids = itertools.count(1)
_lock = threading.Lock()


class JanusAssumption(Exception):
    """A heap value did not have the type/shape a graph was specialised on."""

    def __init__(self, assumption_id: int, message: str) -> None:
        super().__init__(message)
        self.assumption_id = assumption_id


@dataclasses.dataclass(frozen=True)
class Expectation:
    """What a heap location holds, as the graph was specialised: kind and dtype/shape or class."""

    kind: str  # "tensor", "object", "float", "int", "bool"
    assumption_id: int
    dtype: tf.DType | None = None
    shape: tuple | None = None
    cls: type | None = None
    optional: bool = False  # may also be None: an object as pointer 0, a number as [present, value]

    def check(self, value: object) -> None:
        kind = self.kind
        if kind == "tensor":
            ok = (
                isinstance(value, EagerTensor)
                and value.dtype == self.dtype
                and (self.shape is None or tf.TensorShape(self.shape).is_compatible_with(value.shape))
            )
        elif kind == "object":
            ok = type(value) is self.cls or (self.optional and value is None)
        elif self.optional and value is None:
            ok = True
        elif kind == "int":
            ok = type(value) is int and -(2**63) <= value < 2**63
        else:  # bool, float
            ok = type(value) is (bool if kind == "bool" else float)
        if not ok:
            raise JanusAssumption(self.assumption_id, f"heap value {type(value).__name__} is not the expected {self}")


def expect(expectation: Expectation) -> int:
    """Registers what a heap op expects; returns the id its ``expect`` attribute carries."""
    with _lock:
        key = next(_ids)
        _expectations[key] = expectation
    return key


class CallStore:
    """Local copies and the write log of one graph call."""

    def __init__(self) -> None:
        self.id = next(_ids)
        self.objects: dict[int, object] = {}
        self.local: dict[tuple[int, object], object] = {}
        self.writes: list[tuple[str, object, object, object]] = []

    def pointer(self, obj: object) -> int:
        self.objects[id(obj)] = obj  # also keeps it alive for the call
        return id(obj)

    def resolve(self, pointer: int) -> object:
        if pointer == 0:
            return None
        try:
            return self.objects[pointer]
        except KeyError:
            raise RuntimeError(f"janus heap op got a pointer its store never handed out: {pointer:#x}") from None

    def commit(self) -> None:
        for kind, obj, key, value in self.writes:
            if kind == "attr":
                setattr(obj, key, value)
            else:
                obj[key] = value


class StoreFactory:
    """Gives each call of one graph its store: ``handle()``/``pointer()`` are used by prepare()."""

    def __init__(self) -> None:
        self.current: CallStore | None = None

    def _store(self) -> CallStore:
        if self.current is None:
            self.current = CallStore()
            _stores[self.current.id] = self.current
        return self.current

    def handle(self) -> tf.Tensor:
        return tf.constant(self._store().id, tf.int64)

    def pointer(self, obj: object) -> tf.Tensor:
        return tf.constant(self._store().pointer(obj), tf.int64)

    def finish(self, commit: bool) -> None:
        store, self.current = self.current, None
        if store is not None:
            _stores.pop(store.id, None)
            if commit:
                store.commit()


def _to_kernel(value: object, expectation: Expectation, store: CallStore) -> np.ndarray | int | float | bool:
    """What a read hands the kernel: an array for a tensor, a Python scalar otherwise (an object as its pointer)."""
    expectation.check(value)
    if expectation.kind == "tensor":
        return np.asarray(value.numpy(), order="C")  # 0-d stays 0-d (ascontiguousarray makes it 1-d)
    if expectation.kind == "object":
        return 0 if value is None else store.pointer(value)
    if expectation.optional:  # a number or None: [present, value]
        dtype = _SCALAR_DTYPES[expectation.kind]
        return np.array([False, False] if value is None else [True, value], dtype)
    return value


_SCALAR_DTYPES = {"int": np.int64, "float": np.float64, "bool": np.bool_}


def _from_payload(payload: tuple, expectation: Expectation, store: CallStore) -> object:
    data, dtype_enum, shape = payload
    array = np.frombuffer(data, tf.dtypes.as_dtype(dtype_enum).as_numpy_dtype).reshape(shape)
    if expectation.kind == "tensor":
        return tf.constant(array)
    if expectation.kind == "object":
        return store.resolve(int(array))
    if expectation.kind == "bool":
        return bool(array)
    return float(array) if expectation.kind == "float" else int(array)


def _read(store_id: int, obj: object, key: object, kind: str, expect_id: int) -> np.ndarray | int | float | bool:
    store = _stores[store_id]
    local = store.local.get((id(obj), key), _MISSING)
    if local is not _MISSING:
        value = local
    elif kind == "attr":
        value = len(obj) if key == "__len__" and type(obj) is list else getattr(obj, key)
    else:
        value = obj[key]
    return _to_kernel(value, _expectations[expect_id], store)


def get_attr(store_id: int, pointer: int, name: str, expect_id: int) -> np.ndarray | int | float | bool:
    return _read(store_id, _stores[store_id].resolve(pointer), name, "attr", expect_id)


def get_item(store_id: int, pointer: int, index: int, expect_id: int) -> np.ndarray | int | float | bool:
    return _read(store_id, _stores[store_id].resolve(pointer), index, "item", expect_id)


def _write(store_id: int, obj: object, key: object, kind: str, payload: tuple, expect_id: int) -> None:
    store = _stores[store_id]
    value = _from_payload(payload, _expectations[expect_id], store)
    store.local[(id(obj), key)] = value
    store.writes.append((kind, obj, key, value))


def set_attr(store_id: int, pointer: int, name: str, payload: tuple, expect_id: int) -> None:
    _write(store_id, _stores[store_id].resolve(pointer), name, "attr", payload, expect_id)


def set_item(store_id: int, pointer: int, index: int, payload: tuple, expect_id: int) -> None:
    _write(store_id, _stores[store_id].resolve(pointer), index, "item", payload, expect_id)


_MISSING = object()
