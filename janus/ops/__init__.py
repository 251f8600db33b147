"""Python wrappers for janus's C++ ops."""

from janus.ops.assert_op import ASSUMPTION_MARKER, failed_assumption_id, janus_assert

__all__ = ["ASSUMPTION_MARKER", "failed_assumption_id", "janus_assert"]
