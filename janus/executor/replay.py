"""Deferred effects replayed after a graph succeeded, exactly as eager would have made them.

Converted code's ``warnings.warn`` and ``logging`` calls are not made while generating; the
commit calls these functions instead, in program order, with the materialised values. Each is
told where the user's call stands (file, line, function), so the warning registry ("once per
location") and the log record's caller are eager's, not janus's.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings


@dataclasses.dataclass(frozen=True)
class CallSite:
    """The user's call that a replay stands for."""

    filename: str
    lineno: int
    function: str
    module_globals: dict = dataclasses.field(compare=False, hash=False)


def warn(site: CallSite, message: object, category: type | None = None, stacklevel: int = 1, source=None) -> None:
    """``warnings.warn`` as made at ``site`` (stacklevel 1)."""
    if isinstance(message, Warning):
        category = type(message)
    if category is None:
        category = UserWarning
    registry = site.module_globals.setdefault("__warningregistry__", {})
    module = site.module_globals.get("__name__", "<string>")
    warnings.warn_explicit(message, category, site.filename, site.lineno, module, registry, site.module_globals, source)


def raises(category: type) -> bool:
    """Whether a warnings filter would turn a ``category`` warning into an exception (a superset:
    the message, module and line of a filter are not matched)."""
    return any(action == "error" and issubclass(category, cat) for action, _, cat, _, _ in warnings.filters)


def recording_is_callable() -> bool:
    """``tf.summary.record_if(fn)`` is in force: its condition is evaluated when a summary is written."""
    from tensorflow.python.ops import summary_ops_v2

    return callable(getattr(summary_ops_v2._summary_state, "is_recording", None))


def default_step_kind() -> object:
    """The default ``tf.summary`` step as far as a graph depends on it: a variable by identity."""
    import tensorflow as tf

    step = tf.summary.experimental.get_step()
    return id(step) if isinstance(step, tf.Variable) else type(step)


LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


def log(
    site: CallSite, logger: logging.Logger, level: int, module_level: bool, msg: object, *args: object, **kwargs: object
) -> None:
    """``logger.<level>(msg, *args)`` as made at ``site``; ``module_level``: ``logging.info`` & co."""
    if module_level and not logging.root.handlers:
        logging.basicConfig()  # what the module-level functions do first
    if not logger.isEnabledFor(level):
        return
    extra = kwargs.get("extra")
    record = logger.makeRecord(logger.name, level, site.filename, site.lineno, msg, args, None, site.function, extra)
    logger.handle(record)
