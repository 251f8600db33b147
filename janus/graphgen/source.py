"""Source and AST of user functions, with locations for diagnostics."""

from __future__ import annotations

import functools
import inspect
import textwrap
import tokenize
import types

import gast

from janus.graphgen.errors import NotConvertible


@functools.cache
def function_ast(code: types.CodeType) -> gast.FunctionDef:
    """The gast ``FunctionDef`` of ``code``, with line numbers as in its file.

    A lambda is found among the lambdas of its source line by its parameter names, and
    returned as the equivalent ``def`` (``return <body>``).
    """
    try:
        lines, first = inspect.getsourcelines(code)
    except (OSError, TypeError, SyntaxError, UnicodeDecodeError, tokenize.TokenError) as err:
        raise NotConvertible(
            f"source unavailable ({type(err).__name__}: {err}); janus reads a function's source: define it in a "
            ".py file (not `python -c`, the REPL or exec)",
            location(code),
        ) from None
    try:
        tree = gast.parse(textwrap.dedent("".join(lines)))
    except (SyntaxError, ValueError):
        raise NotConvertible("source cannot be parsed on its own", location(code)) from None
    for node in gast.walk(tree):
        for attr in ("lineno", "end_lineno"):
            if getattr(node, attr, None) is not None:
                setattr(node, attr, getattr(node, attr) + first - 1)
    if code.co_name == "<lambda>":
        return _lambda_def(tree, code)
    node = tree.body[0]
    if not isinstance(node, gast.FunctionDef):
        raise NotConvertible(f"unsupported definition {type(node).__name__}", location(code))
    return node


def _lambda_def(tree: gast.AST, code: types.CodeType) -> gast.FunctionDef:
    params = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    candidates = [
        n
        for n in gast.walk(tree)
        if isinstance(n, gast.Lambda)
        and n.lineno == code.co_firstlineno
        and [a.id for a in n.args.args + n.args.kwonlyargs] == params
    ]
    if len(candidates) != 1:
        raise NotConvertible("lambda cannot be told apart from others on its line", location(code))
    node = candidates[0]
    body = [gast.copy_location(gast.Return(value=node.body), node.body)]
    return gast.copy_location(
        gast.FunctionDef(name="<lambda>", args=node.args, body=body, decorator_list=[], returns=None,
                         type_comment=None, type_params=[]),
        node,
    )  # fmt: skip


def location(code: types.CodeType, node: gast.AST | None = None) -> str:
    line = getattr(node, "lineno", None) or code.co_firstlineno
    return f"{code.co_filename}:{line}"
