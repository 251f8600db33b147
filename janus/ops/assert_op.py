"""``JanusAssert``: fails a graph run with a recognisable "assumption N broke" status."""

from __future__ import annotations

import re

import tensorflow as tf

from janus.ops import build

ASSUMPTION_MARKER = "JANUS_ASSUMPTION_FAILED:"
_MARKER_RE = re.compile(re.escape(ASSUMPTION_MARKER) + r"(\d+):")


def _ops():
    return build.ops()


def janus_assert(condition: tf.Tensor, assumption_id: int) -> tf.Operation:
    """Adds a JanusAssert op checking the scalar boolean ``condition``."""
    return _ops().janus_assert(condition, assumption_id=assumption_id)


def failed_assumption_id(error: BaseException) -> int | None:
    """The assumption id if ``error`` came from a failed JanusAssert, else None."""
    if not isinstance(error, tf.errors.OpError):
        return None
    match = _MARKER_RE.search(error.message or "")
    return int(match.group(1)) if match else None
