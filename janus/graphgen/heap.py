"""Heap mutations of converted code: local copies during the call, replayed after the graph succeeds.

Every write the user's code makes to Python state (``obj.attr = v``, ``d[k] = v``,
``lst.append(v)``, ``global``/``nonlocal`` assignments) and every deferred call (``print``,
``logging``, ``warnings.warn``, ``tf.summary``: see ``janus.source.purity``) is logged here
instead of being performed. Reads of a written location in the same call see the logged value (the
local copy). The values a write needs become graph outputs; after the graph ran and every
assumption held, the executor calls the generated ``commit`` function, which replays the log
in program order on the real objects. When an assumption fails nothing was written, so the
eager re-run starts from the untouched state: all-or-nothing.

Write targets are *paths* (``a0``, ``K3.cell_contents``, ``K1['counter']``) evaluated
at commit time, exactly like guards, so a list passed in as an argument is the one appended to.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import tensorflow as tf

from janus.assumptions.sources import Source
from janus.executor import interrupts
from janus.graphgen.errors import NotConvertible

_MISSING = object()


@dataclasses.dataclass
class Write:
    # "setattr", "setitem", "append", "extend", "pop", "insert", "clear", "__delitem__", "call", "statement"
    kind: str
    target: object  # the object written to (for read-your-writes); for "call", the callable
    source: Source | None  # where the target object is re-read at commit time (None: a call)
    key: object  # attribute name or item key (plain constant); unused for append/extend/print
    value: object  # the value written (tensor, PyNumber, static, or (args, kwargs) for a call)
    location: str
    ops_before: int = 0  # how many ops the graph had when it was logged: its place in program order

    def describe(self) -> str:
        """What the write does, for messages: ``attribute n of argument self is set (f.py:3)``."""
        if self.kind == "call":
            return f"a call of {_called(self.target)} made after the graph ran ({self.location})"
        if self.kind == "statement":
            return f"the statement at {self.location}, run after the graph"
        what = self.source.describe() if self.source is not None else "an object"
        if self.kind == "setattr":
            return f"attribute {self.key} of {what} is set ({self.location})"
        if self.kind == "setitem":
            return f"item {self.key!r} of {what} is set ({self.location})"
        return f"{what}.{self.kind}() ({self.location})"


def _called(target: object) -> str:
    """The name of a deferred call's function, as the user wrote it (janus's replays of a logging
    call or ``warnings.warn`` are partials of ``janus.executor.replay``'s functions)."""
    while isinstance(target, functools.partial):
        target = target.func
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    if getattr(target, "__module__", "") == "janus.executor.replay":
        return {"log": "logging", "warn": "warnings.warn"}.get(name, name)
    return name


def run_statement(fn: Callable, namespace: dict, values: tuple) -> None:
    """Runs a statement logged to run after the graph, with Ctrl-C let through (it is user code)."""
    with interrupts.let_through():
        fn(namespace, *values)


class HeapList:
    """A list that lives on the heap, read lazily: appending needs no snapshot and no guard.

    Only reading its contents (``len``, iteration, indexing) guards its length and elements.
    """

    def __init__(self, real: list, source: Source, loc: str, heap: HeapLog, read, check) -> None:
        self.real = real
        self._check_straight_line = check  # ctx's: logged writes only from straight-line code
        self.source = source
        self.what = source.describe()
        self.loc = loc
        self._heap = heap
        self._read = read  # ctx.read_heap, for materialising elements with guards
        self._items: list | None = None
        self._pending: list[tuple[str, object]] = []

    def _not_wrapped(self, values: list) -> None:
        """A tracking list (TF's ``ListWrapper``, Keras's ``TrackedList``) wraps a list or dict put
        into it in a tracking container of its own: this call's local copy would hold the plain one."""
        if type(self.real) is not list and any(type(v) in (list, dict, set) or isinstance(v, HeapList) for v in values):
            raise NotConvertible(
                f"a list or dict put into a {type(self.real).__name__} attribute (which wraps it in a tracking "
                "container)",
                self.loc,
            )

    def append(self, value: object) -> None:
        self._not_wrapped([value])
        self._check_straight_line(self.loc)
        self._heap.log(Write("append", self.real, self.source, None, value, self.loc))
        self._pending.append(("append", value))
        if self._items is not None:
            self._items.append(value)

    def extend(self, values: object) -> None:
        values = list(values.materialize() if isinstance(values, HeapList) else values)
        self._not_wrapped(values)
        self._check_straight_line(self.loc)
        self._heap.log(Write("extend", self.real, self.source, None, values, self.loc))
        self._pending.append(("extend", values))
        if self._items is not None:
            self._items.extend(values)

    def materialize(self) -> list:
        """The list's current contents as this call sees them (guards the original contents)."""
        if self._items is None:
            items = self._read(self.real, self.source, self.loc, None, materialize=True)
            for op, value in self._pending:
                items.append(value) if op == "append" else items.extend(value)
            self._items = items
        return self._items

    def pop(self, index: int = -1) -> object:
        return self._change("pop", index, None, lambda items: items.pop(index))

    def insert(self, index: int, value: object) -> None:
        self._not_wrapped([value])
        return self._change("insert", index, value, lambda items: items.insert(index, value))

    def clear(self) -> None:
        return self._change("clear", None, None, lambda items: items.clear())

    def _change(self, kind: str, key: object, value: object, apply) -> object:
        if not (key is None or type(key) is int):
            raise NotConvertible(f"list.{kind}() at an index known only at run time", self.loc)
        self._check_straight_line(self.loc)
        try:
            result = apply(self.materialize())  # the contents as this call sees them (guarded)
        except IndexError:
            raise NotConvertible(f"list.{kind}() raises IndexError here", self.loc) from None
        self._heap.log(Write(kind, self.real, self.source, key, value, self.loc))
        return result

    def setitem(self, key: object, value: object) -> None:
        self._not_wrapped([value])
        self._check_straight_line(self.loc)
        items = self.materialize()
        items[key] = value
        self._heap.log(Write("setitem", self.real, self.source, key, value, self.loc))


@dataclasses.dataclass(eq=False)
class PyObjectRef:
    """A Python object known only at run time: an int64 pointer tensor its call's store resolves.

    ``samples`` are the objects this position held while generating; the types of their
    attributes decide what reading one yields (checked again at run time by the store).
    """

    pointer: object  # int64 tensor
    cls: type
    samples: list
    optional: bool = False  # may be None at run time (pointer 0)
    argument: bool = False  # an argument passed by pointer (a batch), not an attribute read at run time


class HeapLog:
    """The ordered log of one generation's heap writes, with read-your-writes local copies."""

    def __init__(self) -> None:
        self.writes: list[Write] = []
        self._local: dict[tuple[int, object], object] = {}
        self._targets: list[object] = []  # keeps written objects alive so their ids stay unique

    def log(self, write: Write) -> None:
        write.ops_before = len(tf.compat.v1.get_default_graph().get_operations())
        self.writes.append(write)
        self._targets.append(write.target)
        if write.kind in ("setattr", "setitem"):
            self._local[(id(write.target), write.key)] = write.value

    def local(self, target: object, key: object) -> object:
        """The value this call wrote to ``target``'s ``key`` earlier, or ``MISSING``."""
        return self._local.get((id(target), key), _MISSING)

    def compile(
        self, nargs: int, namespace: dict, value_code: Callable[[object], str], const: Callable[[object], str]
    ) -> Callable | None:
        """The generated ``commit(V, a0, a1, ...)`` replaying the log; V holds the written values."""
        if not self.writes:
            return None
        lines = []
        for i, write in enumerate(self.writes):
            value = value_code(i)
            if write.kind == "setattr":
                lines.append(f"setattr({write.source}, {write.key!r}, {value})")
            elif write.kind == "setitem":
                lines.append(f"{write.source}[{const(write.key)}] = {value}")
            elif write.kind in ("append", "extend"):
                lines.append(f"{write.source}.{write.kind}({value})")
            elif write.kind == "call":
                lines.append(f"{const(write.target)}(*{value}[0], **{value}[1])")
            elif write.kind == "statement":  # janus.graphgen.later: D holds the locals such statements bind
                lines.append(f"{const(run_statement)}({const(write.target)}, D, {value}[0])")
            elif write.kind == "pop":
                lines.append(f"{write.source}.pop({'' if write.key is None else const(write.key)})")
            elif write.kind == "insert":
                lines.append(f"{write.source}.insert({write.key!r}, {value})")
            elif write.kind == "clear":
                lines.append(f"{write.source}.clear()")
            elif write.kind == "__delitem__":
                lines.append(f"del {write.source}[{const(write.key)}]")
            else:  # pragma: no cover - the kinds above are all that is logged
                raise NotConvertible(f"unknown heap write {write.kind}", write.location)
        if any(write.kind == "statement" for write in self.writes):
            lines.insert(0, "D = {}")
        params = ", ".join(["V", *(f"a{i}" for i in range(nargs))])
        source = f"def commit({params}):\n" + "".join(f"    {line}\n" for line in lines)
        scope = dict(namespace)
        exec(compile(source, "<janus commit>", "exec"), scope)  # noqa: S102 - generated by janus
        commit = scope["commit"]
        commit.source = source
        return commit


MISSING = _MISSING
