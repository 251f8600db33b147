"""Source and AST of user functions, with locations for diagnostics."""

from __future__ import annotations

import functools
import inspect
import textwrap
import tokenize
import types
import weakref

import gast

from janus.graphgen.errors import NotConvertible

# Functions janus generated itself (the segments of a split function, janus/partial): no file
# holds their source, so their gast is registered here, by the code object's identity. Not a
# WeakKeyDictionary: code objects compare by value, so the segments of two splits of the same
# function shared one entry, and the first one's death removed the second's AST.
_generated: dict[int, tuple[weakref.ref, gast.FunctionDef]] = {}


def register_ast(code: types.CodeType, node: gast.FunctionDef) -> None:
    """Makes ``function_ast(code)`` return ``node`` (line numbers as in the user's file)."""
    key = id(code)
    _generated[key] = (weakref.ref(code, lambda _ref, key=key: _forget(key, _ref)), node)


def _forget(key: int, ref: weakref.ref) -> None:
    entry = _generated.get(key)
    if entry is not None and entry[0] is ref:
        del _generated[key]


def function_ast(code: types.CodeType) -> gast.FunctionDef:
    """The gast ``FunctionDef`` of ``code``: as registered (``register_ast``), or read from its file."""
    entry = _generated.get(id(code))
    if entry is not None and entry[0]() is code:
        return entry[1]
    return _function_ast_from_source(code)


@functools.cache
def _function_ast_from_source(code: types.CodeType) -> gast.FunctionDef:
    """The gast ``FunctionDef`` of ``code``, with line numbers as in its file.

    A lambda is found among the lambdas of its source line by its parameter names (and, where
    several share them, by the columns its code comes from), and returned as the equivalent ``def``
    (``return <body>``). A lambda whose lines do not parse on their own (an item of a dict literal
    that spans lines) is found in its whole file.
    """
    if code.co_filename in _SHARED_FILE_NAMES:
        raise _source_unavailable(code, f"{code.co_filename} names no one source")
    try:
        lines, first = inspect.getsourcelines(code)
    except (OSError, TypeError, SyntaxError, UnicodeDecodeError, tokenize.TokenError) as err:
        raise _source_unavailable(code, f"{type(err).__name__}: {err}") from None
    try:
        tree = gast.parse(textwrap.dedent("".join(lines)))
    except (SyntaxError, ValueError):
        if code.co_name == "<lambda>":
            return _lambda_def(_file_tree(code), code, exact_columns=True)
        raise NotConvertible("source cannot be parsed on its own", location(code)) from None
    for node in gast.walk(tree):
        for attr in ("lineno", "end_lineno"):
            if getattr(node, attr, None) is not None:
                setattr(node, attr, getattr(node, attr) + first - 1)
    if code.co_name == "<lambda>":
        try:
            return _lambda_def(tree, code)
        except NotConvertible:  # several alike on the line: the file's columns tell them apart
            return _lambda_def(_file_tree(code), code, exact_columns=True)
    node = tree.body[0]
    if isinstance(node, gast.FunctionDef) and not _same_names(
        [node.name, *_param_names(node.args)], [code.co_name, *_params(code)]
    ):
        raise _source_unavailable(code, f"the lines there define another function, {node.name}")
    if isinstance(node, gast.AsyncFunctionDef):
        raise NotConvertible("unsupported definition AsyncFunctionDef", location(code))
    if not isinstance(node, gast.FunctionDef):
        raise _source_unavailable(code, f"the lines there are no definition but {type(node).__name__}")
    return node


def _params(code: types.CodeType) -> list[str]:
    """The names of ``code``'s parameters, ``*args`` and ``**kwargs`` included, in order."""
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return list(code.co_varnames[:count])


def _param_names(args: gast.arguments) -> list[str]:
    """The parameter names of a gast ``arguments``, in the order code objects list them."""
    named = [a.id for a in args.posonlyargs + args.args + args.kwonlyargs]
    return named + [a.id for a in (args.vararg, args.kwarg) if a is not None]


def _same_names(written: list[str], compiled: list[str]) -> bool:
    """Whether the names of a definition's source are its code's: equal, or a private name
    (``__t``) as a class body mangles it (``_C__t``)."""
    return len(written) == len(compiled) and all(
        w == c or (w.startswith("__") and not w.endswith("__") and c.startswith("_") and c.endswith(w))
        for w, c in zip(written, compiled)
    )


# File names that exec, eval and compile give code by default, and that Python 3.13 gives the
# program of `python -c` in linecache (pytest-xdist's workers are such programs): the lines
# linecache holds under them may be another program's, so janus reads no source there.
_SHARED_FILE_NAMES = frozenset({"<string>"})


def _source_unavailable(code: types.CodeType, why: str) -> NotConvertible:
    return NotConvertible(
        f"source unavailable ({why}); janus reads a function's source: define it in a "
        ".py file (not `python -c`, the REPL or exec)",
        location(code),
    )


def _file_tree(code: types.CodeType) -> gast.AST:
    """The gast tree of the whole file ``code`` comes from (line numbers and columns as in it)."""
    try:
        lines, _ = inspect.findsource(code)
        return _parsed("".join(lines))
    except (OSError, TypeError, SyntaxError, ValueError, UnicodeDecodeError, tokenize.TokenError):
        raise NotConvertible("source cannot be parsed on its own", location(code)) from None


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> gast.AST:
    return gast.parse(text)


def _lambda_def(tree: gast.AST, code: types.CodeType, exact_columns: bool = False) -> gast.FunctionDef:
    params = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    candidates = [
        n
        for n in gast.walk(tree)
        if isinstance(n, gast.Lambda)
        and n.lineno == code.co_firstlineno
        and _same_names([a.id for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs], params)
    ]
    if len(candidates) > 1 and exact_columns:
        candidates = [n for n in candidates if _holds_positions(n.body, code)]
    if not candidates:
        raise _source_unavailable(code, "no lambda with its parameters on that line")
    if len(candidates) > 1:
        raise NotConvertible("lambda cannot be told apart from others on its line", location(code))
    node = candidates[0]
    body = [gast.copy_location(gast.Return(value=node.body), node.body)]
    return gast.copy_location(
        gast.FunctionDef(name="<lambda>", args=node.args, body=body, decorator_list=[], returns=None,
                         type_comment=None, type_params=[]),
        node,
    )  # fmt: skip


def _holds_positions(node: gast.AST, code: types.CodeType) -> bool:
    """Whether every source position of ``code``'s instructions lies within ``node``."""
    start, end = (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)
    spans = [(p[0], p[2], p[1], p[3]) for p in code.co_positions() if None not in p]
    positions = [s for s in spans if s[:2] != s[2:]]  # empty spans (the frame's own setup) say nothing
    return bool(positions) and all(start <= (a, b) and (c, d) <= end for a, b, c, d in positions)


def location(code: types.CodeType, node: gast.AST | None = None) -> str:
    line = getattr(node, "lineno", None) or code.co_firstlineno
    return f"{code.co_filename}:{line}"
