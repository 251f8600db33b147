"""Typed sources: where a value the generated code specialised on is re-read before each call.

A source is a small immutable tree (TorchDynamo's ``LocalSource``/``AttrSource``/``GetItemSource``):
an argument, a constant the entry keeps (a function's cell, a module's globals), and attribute,
item and call steps from those. It renders as the Python expression ``prepare()`` and the commit
code evaluate (``a0.layers[2].w``), and describes itself the way ``explain()`` names the value
(``attribute w``). Guards (``janus.assumptions.guards``), heap writes and graph feeds all take
sources, so a path is built once, by these classes, not by f-strings at each use.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a value is re-read; ``str(source)`` is the expression over ``a0..`` and ``K0..`` names."""

    def expr(self) -> str:
        raise NotImplementedError

    def describe(self) -> str:
        """How ``explain()`` and assumption keys name the value."""
        raise NotImplementedError

    def display(self) -> str:
        """The path as the user's code spells it (``G['model'].w``, ``x[0]``): for ``explain()``."""
        return self.expr()

    def __str__(self) -> str:
        return self.expr()

    def __format__(self, spec: str) -> str:
        return format(self.expr(), spec)

    def attr(self, name: str) -> AttrSource:
        return AttrSource(self, name)

    def item(self, key: object, const: Callable[[object], str] | None = None) -> ItemSource:
        """``self[key]``; a key whose repr is no Python literal (inf, ``np.int64(3)``) is rendered as
        the constant ``const(key)`` names."""
        if is_literal(key):
            return ItemSource(self, key)
        if const is None:
            raise ValueError(f"item key {key!r} needs a constant name")
        return ItemSource(self, key, const(key))


@dataclasses.dataclass(frozen=True)
class ArgumentSource(Source):
    """The ``index``-th argument of the call (``prepare(a0, a1, ...)``)."""

    index: int
    name: str

    def expr(self) -> str:
        return f"a{self.index}"

    def describe(self) -> str:
        return f"argument {self.name}"

    def display(self) -> str:
        return self.name


@dataclasses.dataclass(frozen=True)
class ConstSource(Source):
    """An object the cache entry keeps alive under the name ``const`` (``K3``): a cell, a class,
    a module's globals dict, a function."""

    const: str
    what: str = "a constant"

    def expr(self) -> str:
        return self.const

    def describe(self) -> str:
        return self.what

    def display(self) -> str:
        return self.what


@dataclasses.dataclass(frozen=True)
class GlobalSource(Source):
    """``name`` in the globals dict kept as ``namespace`` (a ``K`` name)."""

    namespace: str
    name: str

    def expr(self) -> str:
        return f"{self.namespace}[{self.name!r}]"

    def describe(self) -> str:
        return f"global {self.name}"

    def display(self) -> str:
        return f"G[{self.name!r}]"


@dataclasses.dataclass(frozen=True)
class CellSource(Source):
    """The contents of the closure cell kept as ``cell``, the free variable ``name``."""

    cell: str
    name: str

    def expr(self) -> str:
        return f"{self.cell}.cell_contents"

    def describe(self) -> str:
        return f"closure {self.name}"

    def display(self) -> str:
        return f"C[{self.name!r}]"


@dataclasses.dataclass(frozen=True)
class DefaultSource(Source):
    """A parameter's default value: positional (``__defaults__[index]``) or keyword-only."""

    function: str
    name: str
    index: int | None  # None: keyword-only

    def expr(self) -> str:
        if self.index is None:
            return f"{self.function}.__kwdefaults__[{self.name!r}]"
        return f"{self.function}.__defaults__[{self.index}]"

    def describe(self) -> str:
        return f"default {self.name}"

    def display(self) -> str:
        return f"D[{self.name!r}]"


@dataclasses.dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    name: str

    def expr(self) -> str:
        return f"{self.base.expr()}.{self.name}"

    def describe(self) -> str:
        return f"attribute {self.name}"

    def display(self) -> str:
        return f"{self.base.display()}.{self.name}"


@dataclasses.dataclass(frozen=True)
class ItemSource(Source):
    """``base[key]`` for a plain key (an int, a str, a tuple of those)."""

    base: Source
    key: object
    key_expr: str | None = None  # the key's constant, where its repr is no literal

    def expr(self) -> str:
        return f"{self.base.expr()}[{self.key_expr or repr(self.key)}]"

    def describe(self) -> str:
        return f"{self.base.describe()}[{self.key!r}]"

    def display(self) -> str:
        return f"{self.base.display()}[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class CallSource(Source):
    """``function(*args)``: a value computed from sources (a Keras object's settings fingerprint,
    a deferred call's probe, the method ``super()`` resolves to). ``args`` are sources or
    expressions of constants."""

    function: str
    args: tuple = ()
    what: str = ""

    def expr(self) -> str:
        return f"{self.function}({', '.join(str(a) for a in self.args)})"

    def describe(self) -> str:
        return self.what or self.expr()

    def display(self) -> str:
        shown = ", ".join(a.display() if isinstance(a, Source) else "…" for a in self.args)
        return f"{self.what or 'call'}({shown})"


def is_literal(key: object) -> bool:
    """Whether ``repr(key)`` evaluates back to an equal key of the same type."""
    if type(key) in (int, str, bytes, bool) or key is None:
        return True
    if type(key) is float:
        return math.isfinite(key)
    return type(key) is tuple and all(is_literal(k) for k in key)
