"""Source and AST of user functions, with locations for diagnostics."""

from __future__ import annotations

import functools
import inspect
import textwrap
import types

import gast

from janus.graphgen.errors import NotConvertible


@functools.cache
def function_ast(code: types.CodeType) -> gast.FunctionDef:
    """The gast ``FunctionDef`` of ``code``, with line numbers as in its file."""
    if code.co_name == "<lambda>":
        raise NotConvertible("lambda defined outside the converted function", location(code))
    try:
        lines, first = inspect.getsourcelines(code)
    except (OSError, TypeError) as err:
        raise NotConvertible(f"source unavailable: {err}", location(code)) from None
    tree = gast.parse(textwrap.dedent("".join(lines)))
    for node in gast.walk(tree):
        for attr in ("lineno", "end_lineno"):
            if getattr(node, attr, None) is not None:
                setattr(node, attr, getattr(node, attr) + first - 1)
    node = tree.body[0]
    if not isinstance(node, gast.FunctionDef):
        raise NotConvertible(f"unsupported definition {type(node).__name__}", location(code))
    return node


def location(code: types.CodeType, node: gast.AST | None = None) -> str:
    line = getattr(node, "lineno", None) or code.co_firstlineno
    return f"{code.co_filename}:{line}"
