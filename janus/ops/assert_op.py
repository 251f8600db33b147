"""``JanusAssert``: fails a graph run with a recognisable "assumption N broke" status.

Under ``portable_asserts()`` (``janus.export``) the same check is TensorFlow's own ``Assert`` op
instead, naming the assumption: a graph that must load where janus's ops are not registered.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator

import tensorflow as tf

from janus.ops import build

ASSUMPTION_MARKER = "JANUS_ASSUMPTION_FAILED:"
_MARKER_RE = re.compile(re.escape(ASSUMPTION_MARKER) + r"(\d+):")


def _ops():
    return build.ops()


_portable = threading.local()
PORTABLE_MESSAGE = "janus export: this call breaks an assumption the exported graph was specialised on: "


@contextlib.contextmanager
def portable_asserts() -> Iterator[None]:
    """Asserts added in this thread meanwhile are TensorFlow's ``Assert`` (no janus op needed to run)."""
    previous = getattr(_portable, "on", False)
    _portable.on = True
    try:
        yield
    finally:
        _portable.on = previous


def janus_assert(condition: tf.Tensor, assumption_id: int, description: str = "") -> tf.Operation:
    """Adds a JanusAssert op checking the scalar boolean ``condition`` (``description`` names it
    in the error of a portable assert)."""
    if getattr(_portable, "on", False):
        return tf.raw_ops.Assert(condition=condition, data=[PORTABLE_MESSAGE + description])
    return _ops().janus_assert(condition, assumption_id=assumption_id)


def failed_assumption_id(error: BaseException) -> int | None:
    """The assumption id if ``error`` came from a failed JanusAssert, else None."""
    if not isinstance(error, tf.errors.OpError):
        return None
    match = _MARKER_RE.search(error.message or "")
    return int(match.group(1)) if match else None
