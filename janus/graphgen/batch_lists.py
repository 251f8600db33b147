"""``[f(tree) for tree in batch]`` over a list passed by pointer (a batch of trees of any length).

Like a ``for`` over such a batch (``Interpreter._bounded_loop``), the first item is computed
unconditionally and each further one under ``tf.cond(i < len(batch))``, up to a bound that doubles
when a longer batch comes. The result is a ``BatchList``: one tensor slot per possible item, the
slots past the batch's length holding zeros, and the length known at run time. Its uses are the
ones whose answer the zero slots cannot change, computed as eager computes them on the real items:
``len()``, ``sum()`` (left to right, adding exact zeros), ``tf.add_n``, ``tf.stack`` (cut to the
length) and the ``tf.reduce_*`` of the stacked items. Any other use is refused.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import gast
import tensorflow as tf

from janus.config import config
from janus.graphgen import control_flow
from janus.graphgen.errors import NotConvertible
from janus.graphgen.heap import PyObjectRef
from janus.graphgen.pynumber import PyNumber
from janus.graphgen.values import is_symbolic

if TYPE_CHECKING:
    from janus.graphgen.interpreter import Frame, Interpreter

_SLOT = "__janus_batch_slot"


@dataclasses.dataclass(frozen=True, eq=False)
class BatchList:
    """A comprehension's items over a batch passed by pointer: ``slots`` past ``count`` are zeros."""

    slots: tuple[tf.Tensor, ...]
    count: tf.Tensor  # int64 scalar

    def stacked(self) -> tf.Tensor:
        return tf.stack(self.slots)[: self.count]

    def total(self) -> tf.Tensor:
        """``sum(items)``: Python's 0 + items[0] + items[1] + ..., the zero slots adding nothing."""
        result = 0 + self.slots[0]
        for slot in self.slots[1:]:
            result = result + slot
        return result


def comprehension(
    interp: Interpreter, scope: Frame, node: gast.ListComp, batch: PyObjectRef, start: int | None, loc: str
) -> BatchList:
    """``[elt for target in batch]`` (``enumerate(batch, start)`` when ``start`` is set)."""
    generator = node.generators[0]
    ctx = interp.ctx
    count = ctx.heap_len(batch, loc).tensor
    bound_key, once_key = f"list loop bound@{loc}", f"list loop runs at least once@{loc}"
    bound = max(len(sample) for sample in batch.samples) * 2 ** ctx.failures(bound_key)
    if bound > config.max_unroll:
        raise NotConvertible(f"a comprehension over a list passed by pointer longer than {config.max_unroll}", loc)
    ctx.check(lambda: count <= bound, bound_key, f"the list has at most {bound} items", loc)
    # an empty batch makes [] (sum() an int 0, tf.add_n raise): no graph can, so such calls run eagerly
    ctx.check(lambda: count >= 1, once_key, "the list is not empty", loc, final=True)

    def item(i: int) -> object:
        element = ctx.heap_get_item(batch, PyNumber(tf.constant(i, tf.int64), int), loc)
        return element if start is None else (start + i, element)

    interp.assign(scope, generator.target, item(0))
    first = interp.eval(scope, node.elt)
    if not is_symbolic(first):
        raise NotConvertible("a comprehension over a list passed by pointer whose items are not tensors", loc)
    slots = [first]
    for i in range(1, bound):
        scope.locals[_SLOT] = tf.zeros_like(first)
        assign = gast.Assign(targets=[gast.Name(_SLOT, gast.Store(), None, None)], value=node.elt, type_comment=None)
        load = interp.loop_item(generator.target, lambda i=i: item(i))
        guarded = gast.copy_location(gast.If(test=gast.Constant(True, None), body=[load, assign], orelse=[]), node)
        control_flow.convert_cond(interp, scope, guarded, tf.constant(i, tf.int64) < count, [], False)
        slot = scope.locals.pop(_SLOT)
        if not is_symbolic(slot) or slot.dtype != first.dtype:
            raise NotConvertible("a comprehension over a list passed by pointer whose items differ in kind", loc)
        slots.append(slot)
    return BatchList(tuple(slots), count)


_REDUCTIONS = (
    tf.reduce_sum, tf.reduce_mean, tf.reduce_max, tf.reduce_min, tf.reduce_prod, tf.math.reduce_std,
    tf.math.reduce_variance, tf.convert_to_tensor,
)  # fmt: skip


def library_call(callee: object, args: list, kwargs: dict, loc: str) -> tuple[object, list, dict]:
    """A library call given a ``BatchList``: the callee and arguments that compute eager's answer."""
    if callee in (tf.add_n, tf.math.add_n) and len(args) == 1 and not kwargs and isinstance(args[0], BatchList):
        return tf.add_n, [list(args[0].slots)], {}
    if callee is tf.stack and isinstance(args[0], BatchList) and kwargs.get("axis", 0) == 0 and len(args) == 1:
        return tf.identity, [args[0].stacked()], {k: v for k, v in kwargs.items() if k == "name"}
    if callee in _REDUCTIONS and args and isinstance(args[0], BatchList):
        if any(isinstance(v, BatchList) for v in (*args[1:], *kwargs.values())):
            raise NotConvertible("a comprehension over a list passed by pointer used twice in one call", loc)
        return callee, [args[0].stacked(), *args[1:]], kwargs
    raise NotConvertible(
        "a list built over a batch passed by pointer used other than by len(), sum(), tf.add_n, tf.stack or "
        "a tf.reduce_*",
        loc,
    )
