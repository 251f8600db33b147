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
# janus's op types that fail a run with the marker: ``JanusAssert`` and the checks that also compute
# the value they check (``janus_unwrap``, ``janus_narrow_int32``). Stateful, like every janus check.
CHECK_OPS = frozenset({"JanusAssert", "JanusUnwrap", "JanusNarrowInt32"})
_MARKER_RE = re.compile(re.escape(ASSUMPTION_MARKER) + r"(\d+):")


def _ops():
    return build.ops()


_portable = threading.local()
PORTABLE_MESSAGE = "janus export: this call breaks an assumption the exported graph was specialised on: "


def exporting() -> bool:
    """Whether this thread builds a graph to export (``portable_asserts``): only ops TF has run there."""
    return getattr(_portable, "on", False)


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


def janus_unwrap(pair: tf.Tensor, assumption_id: int, description: str = "") -> tuple[tf.Tensor, tf.Operation]:
    """The number of an optional heap read ``[present, number]``, and the op that checks it: the run
    fails with the assumption where it is absent (one node; an Unpack, a Cast and a JanusAssert otherwise)."""
    if getattr(_portable, "on", False):
        present, number = tf.unstack(pair)
        check = janus_assert(tf.cast(present, tf.bool), assumption_id, description)
        with tf.control_dependencies([check]):
            return tf.identity(number), check
    value = _ops().janus_unwrap(pair, assumption_id=assumption_id)
    return value, value.op


def janus_narrow_int32(x: tf.Tensor, assumption_id: int, description: str = "") -> tuple[tf.Tensor, tf.Operation]:
    """The int64 ``x`` as int32, and the op that checks it: the run fails with the assumption where an
    element lies outside int32 (one node; two Casts, an Equal and a JanusAssert otherwise)."""
    if getattr(_portable, "on", False):
        narrow = tf.cast(x, tf.int32)
        check = janus_assert(tf.reduce_all(tf.equal(tf.cast(narrow, tf.int64), x)), assumption_id, description)
        with tf.control_dependencies([check]):
            return tf.identity(narrow), check
    value = _ops().janus_narrow_int32(x, assumption_id=assumption_id)
    return value, value.op


def failed_assumption_id(error: BaseException) -> int | None:
    """The assumption id if ``error`` came from a failed JanusAssert, else None."""
    if not isinstance(error, tf.errors.OpError):
        return None
    match = _MARKER_RE.search(error.message or "")
    return int(match.group(1)) if match else None
