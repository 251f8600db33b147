"""Which globals, closure variables and attribute chains each line of a function reads.

The tracer resolves these at every line event of a profiled frame, side-effect free:
names through the frame's dictionaries (a local only as the root of an attribute chain),
attributes only through instance and class ``__dict__`` entries (a property or other
descriptor is never invoked; that read is simply not recorded).
"""

from __future__ import annotations

import builtins
import functools
import types

import gast

from janus.graphgen.errors import NotConvertible
from janus.graphgen.source import function_ast

HeapRead = tuple[str, tuple[str, ...]]  # (root name, attribute chain)
_UNRESOLVED = object()


@functools.cache
def reads_by_line(code: types.CodeType) -> dict[int, tuple[HeapRead, ...]]:
    try:
        node = function_ast(code)
    except (NotConvertible, SyntaxError):
        return {}
    local_names = set(code.co_varnames) | set(code.co_cellvars)
    declared_globals = {name for n in gast.walk(node) if isinstance(n, gast.Global) for name in n.names}
    local_names -= declared_globals
    found: dict[int, list[HeapRead]] = {}

    def visit(n: gast.AST, top: bool) -> None:
        if not top and isinstance(n, (gast.FunctionDef, gast.Lambda, gast.ClassDef)):
            return  # nested scopes have their own code objects
        if isinstance(n, gast.AugAssign):  # `x.count += 1` reads x.count too
            chain = chain_of(n.target, load=False)
            if chain is not None and (chain[0] not in local_names or chain[1]):
                found.setdefault(n.lineno, []).append(chain)
        chain = chain_of(n)
        if chain is not None and (chain[0] not in local_names or chain[1]):  # not a plain local
            found.setdefault(n.lineno, []).append(chain)
            return
        for child in gast.iter_child_nodes(n):
            visit(child, False)

    for stmt in node.body:
        visit(stmt, False)
    return {line: tuple(dict.fromkeys(chains)) for line, chains in found.items()}


def chain_of(n: gast.AST, load: bool = True) -> HeapRead | None:
    """``(root, (attr, ...))`` for ``root.attr...``; with ``load=False`` also for a store target."""
    attrs: list[str] = []
    while isinstance(n, gast.Attribute) and (isinstance(n.ctx, gast.Load) or not load):
        attrs.append(n.attr)
        n = n.value
        load = True  # the base of a store target is itself loaded
    if isinstance(n, gast.Name) and (isinstance(n.ctx, gast.Load) or not load):
        return n.id, tuple(reversed(attrs))
    return None


def resolve(frame: types.FrameType, read: HeapRead) -> object:
    """The value ``read`` has in ``frame`` now, or ``_UNRESOLVED`` if that needs running code."""
    root, attrs = read
    code = frame.f_code
    if root in code.co_freevars or root in code.co_varnames or root in code.co_cellvars:
        value = frame.f_locals.get(root, _UNRESOLVED)
    elif root in frame.f_globals:
        value = frame.f_globals[root]
    elif hasattr(builtins, root):
        value = getattr(builtins, root)
    else:
        return _UNRESOLVED
    for attr in attrs:
        value = _static_attribute(value, attr)
        if value is _UNRESOLVED:
            break
    return value


def _static_attribute(obj: object, attr: str) -> object:
    if isinstance(obj, types.ModuleType):
        return obj.__dict__.get(attr, _UNRESOLVED)
    for klass in type(obj).__mro__:
        if attr in klass.__dict__:
            found = klass.__dict__[attr]
            if hasattr(type(found), "__get__"):
                return _UNRESOLVED  # descriptor (property, method, slot): would run code
            break
    instance_dict = getattr(obj, "__dict__", None)
    if isinstance(instance_dict, dict) and attr in instance_dict:
        return instance_dict[attr]
    return _UNRESOLVED


def is_resolved(value: object) -> bool:
    return value is not _UNRESOLVED
