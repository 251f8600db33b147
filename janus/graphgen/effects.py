"""Deferred calls: what converted code's ``print``, ``logging``, ``warnings.warn`` and ``tf.summary``
become in the heap log (see ``janus.source.purity`` for which calls are deferred).

Each is replayed after the graph succeeded, in program order with the heap writes, with the
materialised values, by a function that makes the same call eager would have made at the
user's line (``janus.executor.replay``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import io
import logging
import sys
import types
import warnings
from collections.abc import Callable

from janus.executor import replay
from janus.graphgen.errors import NotConvertible
from janus.graphgen.values import is_plain, is_user_object


@dataclasses.dataclass
class Deferred:
    """What the commit calls in place of the user's call, and what must hold for that to be eager's."""

    fn: Callable
    args: list
    kwargs: dict
    guards: list[tuple[Callable[[], object], object, str]] = dataclasses.field(default_factory=list)
    # (probe, value it had while generating, description): prepare() checks probe() == value


def deferred_call(callee: object, args: list, kwargs: dict, site: replay.CallSite, loc: str) -> Deferred:
    """The deferred form of ``callee(*args, **kwargs)``, or NotConvertible."""
    if callee is print:
        if set(kwargs) - {"sep", "end", "file", "flush"}:
            raise NotConvertible("print() with these arguments is not deferred", loc)
        return Deferred(print, args, kwargs, _file_guards(kwargs.get("file"), loc))
    if callee is warnings.warn:
        return _deferred_warning(args, kwargs, site, loc)
    if is_tf_print(callee):  # eager's own tf.print, on the materialised tensors
        return Deferred(callee, args, kwargs)
    owner = getattr(callee, "__self__", None)
    if isinstance(owner, logging.Logger) or (isinstance(callee, types.FunctionType) and callee.__module__ == "logging"):
        return _deferred_log(callee, owner, args, kwargs, site, loc)
    return _deferred_summary(callee, args, kwargs, loc)


def _file_guards(file: object, loc: str) -> list:
    """A file ``print`` writes to after the graph ran must take the text as it would at the call:
    ``sys.stdout``/``sys.stderr`` as read then, or a library text file open for writing
    (``open()``'s, ``io.StringIO``), checked to be open before each call. Another object's
    ``write`` is code janus does not look into."""
    if file is None or _stream_of(file, "stdout") is not None:
        return []
    if not isinstance(file, io.TextIOBase) or is_user_object(file):
        raise NotConvertible(f"print() to a {type(file).__name__}: its write() is not deferred", loc)
    if file.closed or not file.writable():
        raise NotConvertible("print() to a file it cannot write to: eager raises there", loc)
    return [(functools.partial(_is_closed, file), False, "the file print() writes to is open")]


def _is_closed(file: io.IOBase) -> bool:
    return file.closed


def _deferred_warning(args: list, kwargs: dict, site: replay.CallSite, loc: str) -> Deferred:
    bound = inspect.signature(replay.warn).bind(site, *args, **kwargs).arguments
    if bound.get("stacklevel", 1) != 1:
        raise NotConvertible("warnings.warn() with a stacklevel other than 1 is not deferred", loc)
    message, category = bound["message"], bound.get("category")
    if isinstance(message, Warning):
        category = type(message)
    if category is None:
        category = UserWarning
    if not (isinstance(category, type) and issubclass(category, Warning)):
        raise NotConvertible("warnings.warn() with a category known only at run time", loc)
    probe = functools.partial(replay.raises, category)
    if probe():  # a filter turns it into an exception: raised after the graph ran, too late
        raise NotConvertible(f"a warnings filter turns {category.__name__} into an error", loc)
    return Deferred(functools.partial(replay.warn, site), args, kwargs, [(probe, False, "no warnings filter errors")])


def _deferred_summary(callee: object, args: list, kwargs: dict, loc: str) -> Deferred:
    """A ``tf.summary`` write replayed in the caller's summary context: its step and recording
    condition must be the ones eager would read at the call."""
    import tensorflow as tf
    from tensorflow.python.ops import summary_ops_v2

    if callable(getattr(summary_ops_v2._summary_state, "is_recording", None)):
        raise NotConvertible("tf.summary.record_if() with a function: janus cannot evaluate it at the call", loc)
    guards = [(replay.recording_is_callable, False, "tf.summary.record_if() is not given a function")]
    name = getattr(callee, "__name__", "")
    if name == "set_step":
        return Deferred(callee, args, kwargs, guards)  # a variable is set as itself, as eager does
    try:
        bound = inspect.signature(callee).bind(*args, **kwargs)
    except TypeError:
        raise NotConvertible(f"tf.summary.{name}() with arguments that do not bind", loc) from None
    if "step" in inspect.signature(callee).parameters:
        step = bound.arguments.get("step")
        if step is None:
            default = tf.summary.experimental.get_step()
            guards.append((replay.default_step_kind, replay.default_step_kind(), "the default summary step"))
            step = default
        if isinstance(step, tf.Variable):
            bound.arguments["step"] = step.read_value()  # its value at the call, as eager reads it
    return Deferred(callee, list(bound.args), dict(bound.kwargs), guards)


def _deferred_log(callee: object, owner: object, args: list, kwargs: dict, site: replay.CallSite, loc: str) -> Deferred:
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
    return Deferred(functools.partial(replay.log, site, logger, level, module_level), list(args), kwargs)


def is_tf_print(callee: object) -> bool:
    import tensorflow as tf

    return callee is tf.print


def text_streams(fn: Callable, args: tuple, kwargs: dict) -> set[str]:
    """The streams (``"stdout"``, ``"stderr"``) a deferred call may write text to: none for a file or
    a summary. A logging call counts on both whatever its logger's level and handlers now (they may
    change after the graph is built, and a handler may write anywhere); a warning on stderr."""
    target = getattr(fn, "func", None)  # the partials of _deferred_log and _deferred_warning
    if target is replay.warn:
        return {"stderr"}
    if target is replay.log:
        return {"stdout", "stderr"}
    if fn is print:
        return _streams_of(kwargs.get("file"), "stdout")
    if is_tf_print(fn):
        stream = kwargs.get("output_stream")
        if isinstance(stream, str):
            return set() if stream.startswith("file://") else {"stderr"}
        return _streams_of(stream, "stderr")
    return set()


def _streams_of(stream: object, default: str) -> set[str]:
    name = _stream_of(stream, default)
    return {name} if name else set()


def tf_print_stream_known(kwargs: dict) -> bool:
    """``tf.print``'s ``output_stream`` is one it accepts whatever the call: none, a ``file://``
    path, or ``sys.stdout``/``sys.stderr`` as read at the call. Another string or object (a stream
    saved before a redirect) makes eager's call raise; a logging function is not deferred either."""
    stream = kwargs.get("output_stream")
    if isinstance(stream, str):
        return stream.startswith("file://")
    return stream is None or _stream_of(stream, "stderr") is not None


def _stream_of(stream: object, default: str) -> str | None:
    if stream is None:
        return default
    stream = stream.read() if callable(getattr(stream, "read", None)) and hasattr(stream, "attr") else stream
    if stream is sys.stdout or stream is sys.__stdout__:
        return "stdout"
    if stream is sys.stderr or stream is sys.__stderr__:
        return "stderr"
    return None
