"""Deferred calls: what converted code's ``print``, ``logging``, ``warnings.warn`` and ``tf.summary``
become in the heap log (see ``janus.source.purity`` for which calls are deferred).

Each is replayed after the graph succeeded, in program order with the heap writes, with the
materialised values, by a function that makes the same call eager would have made at the
user's line (``janus.executor.replay``).
"""

from __future__ import annotations

import functools
import logging
import types
import warnings
from collections.abc import Callable

from janus.executor import replay
from janus.graphgen.errors import NotConvertible
from janus.graphgen.values import is_plain


def deferred_call(
    callee: object, args: list, kwargs: dict, site: replay.CallSite, loc: str
) -> tuple[Callable, list, dict]:
    """``(function, args, kwargs)`` that the commit calls in place of ``callee(*args, **kwargs)``."""
    if callee is print:
        if set(kwargs) - {"sep", "end"}:
            raise NotConvertible("print() to a file or with flush is not deferred", loc)
        return print, args, kwargs
    if callee is warnings.warn:
        stacklevel = kwargs.get("stacklevel", args[2] if len(args) > 2 else 1)
        if stacklevel != 1 or len(args) > 3 or set(kwargs) - {"category", "stacklevel"}:
            raise NotConvertible("warnings.warn() with a stacklevel other than 1 is not deferred", loc)
        return functools.partial(replay.warn, site), args, kwargs
    owner = getattr(callee, "__self__", None)
    if isinstance(owner, logging.Logger) or (isinstance(callee, types.FunctionType) and callee.__module__ == "logging"):
        return _deferred_log(callee, owner, args, kwargs, site, loc)
    return callee, args, kwargs  # tf.summary: called as it is, in the caller's summary context


def _deferred_log(
    callee: object, owner: object, args: list, kwargs: dict, site: replay.CallSite, loc: str
) -> tuple[Callable, list, dict]:
    name = callee.__name__
    if name in ("warn", "exception") or set(kwargs) - {"extra"}:
        raise NotConvertible(f"logging {name}() with these arguments is not deferred", loc)
    if name == "log":
        if not args or not (is_plain(args[0]) and isinstance(args[0], int)):
            raise NotConvertible("logging log() with a level known only at run time", loc)
        level, args = args[0], args[1:]
    else:
        level = replay.LEVELS[name]
    if not args:
        raise NotConvertible(f"logging {name}() without a message", loc)
    module_level = owner is None
    logger = logging.root if module_level else owner
    return functools.partial(replay.log, site, logger, level, module_level), list(args), kwargs
