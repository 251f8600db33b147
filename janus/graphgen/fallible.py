"""Which ops of a generated graph may raise at run time.

All-or-nothing (``ordering``) makes every TF state update wait for the ops before it that may
raise, and saves what was updated before the last of them: each op wrongly counted here costs
parallelism (an optimizer's updates wait for the whole backward pass) and copies. So an op counts
as unable to raise only where that is shown while generating:

* its type cannot raise once its shapes are fixed, and they are (``_CANNOT_RAISE``);
* an index, a divisor, an exponent or a padding it takes is known while generating
  (``static_values``) and is in range;
* it only computes such a known value.

Everything else may raise: an unknown op type, control flow holding an op that may raise, a
gather, a sparse op, a user's assert.
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import handle_data_util

from janus.graphgen.static_values import SHAPE_ARITHMETIC, STRIDED_SLICE_MASKS, static_value

# Ops that cannot raise at run time once their shapes are fixed (elementwise float math, reads,
# plain assignments, optimizer updates, gradients of such ops, stateless RNG). With a dimension
# known only at run time (a relaxed shape) any of them may raise (incompatible shapes).
_CANNOT_RAISE = frozenset(
    {
        "NoOp", "ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "Fill",
        "Add", "AddV2", "AddN", "Sub", "Mul", "SquaredDifference", "RealDiv", "DivNoNan", "Maximum", "Minimum", "Pow",
        "Softmax", "LogSoftmax", "Sum", "Mean", "Max", "Min", "Prod", "Any", "All", "MatMul", "BatchMatMulV2",
        "BiasAdd", "BiasAddGrad", "Select", "SelectV2", "Greater", "GreaterEqual", "Less", "LessEqual", "Equal",
        "NotEqual", "LogicalAnd", "LogicalOr", "ClipByValue", "L2Loss", "Transpose", "ExpandDims", "Squeeze", "Pack",
        "Unpack", "ConcatV2", "Tile", "BroadcastTo", "Reshape", "ArgMax", "ArgMin", "Bitcast", "BitwiseAnd",
        "BitwiseOr", "ReluGrad", "Relu6Grad", "LeakyReluGrad", "EluGrad", "SeluGrad", "SoftplusGrad", "SoftsignGrad",
        "TanhGrad", "SigmoidGrad", "RsqrtGrad", "SqrtGrad", "ReciprocalGrad", "Conv2D", "Conv2DBackpropFilter",
        "Conv2DBackpropInput", "MaxPool", "MaxPoolGrad", "AvgPool", "AvgPoolGrad", "FusedBatchNormV3",
        "FusedBatchNormGradV3", "StatelessRandomGetKeyCounter", "StatelessRandomUniformV2", "StatelessRandomNormalV2",
        "ResourceApplyGradientDescent", "ResourceApplyKerasMomentum", "ResourceApplyMomentum", "ResourceApplyAdam",
        "ResourceApplyAdagradV2", "ResourceApplyRMSProp", "ResourceApplyAdaMax", "SoftmaxCrossEntropyWithLogits",
    }
)  # fmt: skip


# Ops that cannot raise whatever their shapes: no input, or one computed element by element (or
# read for its shape), so no two shapes can disagree.
_CANNOT_RAISE_ANY_SHAPE = frozenset(
    {
        "Placeholder", "Const", "Identity", "IdentityN", "StopGradient", "Cast", "Rank",
        "ZerosLike", "OnesLike", "Neg", "Square", "Sqrt", "Rsqrt", "Reciprocal", "Exp", "Log", "Log1p", "Abs",
        "Sign", "Tanh", "Sigmoid", "Relu", "Relu6", "Elu", "Selu", "Softplus", "Softsign", "LeakyRelu", "Floor",
        "Ceil", "Round", "IsNan", "IsInf", "IsFinite", "LogicalNot",
        "StringFormat",  # a tf.print's text: its template is checked when its kernel is made, before any op runs
    }
)  # fmt: skip


def may_raise(op: tf.Operation) -> bool:
    """An op may raise at run time unless that is shown while generating (module docstring).

    Control flow raises where an op of its branches or body may; an integer division or remainder
    where its divisor may be zero; an integer power where its exponent may be negative; a slice
    where its bounds are not known to be in range; a print where it writes to a file."""
    if op.type.startswith("Horovod"):
        return False
    if op.type in _CONTROL_FLOW:
        return _body_may_raise(op)
    if op.type in SHAPE_ARITHMETIC and all(static_value(t) is not None for t in op.outputs):
        return False  # evaluated without error while generating: it computes the same at run time
    if op.type in _DIVISIONS:
        return _divisor_may_be_zero(op) or not _shapes_fixed(op)
    if op.type == "Pow" and op.inputs[1].dtype.is_integer:
        return _exponent_may_be_negative(op) or not _shapes_fixed(op)
    if op.type in _CHECKED_BOUNDS:
        return not (_shapes_fixed(op) and _CHECKED_BOUNDS[op.type](op))
    if op.type == "PrintV2":
        return op.get_attr("output_stream") not in _CONSOLE_STREAMS
    if op.type in _CANNOT_RAISE_ANY_SHAPE:
        return False
    if op.type in _SHAPE_READS:
        return not _shape_fits_out_type(op)
    if op.type in _SHAPE_CHECKED:
        return not _SHAPE_CHECKED[op.type](op)
    if op.type in _RANK_ONLY and op.inputs[0].shape.rank is not None:
        return not (_parameters_valid(op) and (op.type != "Tile" or _tile_no_larger(op)))
    if op.type not in _CANNOT_RAISE:
        return True
    return not (_shapes_fixed(op) and _parameters_valid(op))


def _parameters_valid(op: tf.Operation) -> bool:
    """An axis, a permutation, multiples or a shape an op takes as an input is known while
    generating and valid for the fixed shapes: fed from a Python number, it is not known, and a
    fixed output shape does not show it (the sum of a vector over an axis known only at run time
    is a scalar whatever the axis; a reshape's ``[n, 2]`` of 4 elements is inferred ``[2, 2]``)."""
    check = _PARAMETERS.get(op.type)
    if check is None:
        return True
    index, valid = check
    value = static_value(op.inputs[index])
    if value is None:
        return False
    rank = op.inputs[0 if index != 0 else 1].shape.rank
    return bool(valid(np.asarray(value).ravel(), rank))


def _axes(values: np.ndarray, rank: int) -> bool:
    """In range and not repeated: ``tf.reduce_sum(x, [1, -1])`` of a matrix raises "Axes contains
    duplicate dimension" at run time, which TF's shape function does not check."""
    in_range = bool(np.all((values >= -rank) & (values < max(rank, 1))))
    return in_range and len(set((values % max(rank, 1)).tolist())) == values.size


_PARAMETERS = {  # op type: (input index of the parameter, whether its value is valid for the rank)
    **{reduction: (1, _axes) for reduction in ("Sum", "Mean", "Max", "Min", "Prod", "Any", "All", "ArgMax", "ArgMin")},
    "ConcatV2": (-1, _axes),
    "ExpandDims": (1, lambda values, rank: bool(np.all((values >= -rank - 1) & (values <= rank)))),
    "Transpose": (1, lambda values, rank: sorted(values.tolist()) == list(range(rank))),
    "Tile": (1, lambda values, rank: bool(np.all(values >= 0))),
    "Reshape": (1, lambda values, rank: True),
    "Fill": (0, lambda values, rank: bool(np.all(values >= 0))),
    "BroadcastTo": (1, lambda values, rank: True),
}


def _reshape_fits(op: tf.Operation) -> bool:
    """A reshape raises where the element count does not fit its shape. Where a dimension is known
    only at run time, it cannot raise if the shape is known, holds one ``-1``, and the product of
    its other entries (positive) divides the product of the input's known dimensions."""
    if _shapes_fixed(op):
        return _parameters_valid(op)
    shape = static_value(op.inputs[1])
    if shape is None:
        return False
    shape = np.asarray(shape).ravel()
    rest = shape[shape != -1]
    if np.count_nonzero(shape == -1) != 1 or np.any(rest < 0) or np.prod(rest) <= 0:
        return False
    dims = op.inputs[0].shape
    if dims.rank is None:
        return False
    known = [d for d in dims.as_list() if d is not None]
    return int(np.prod(known, dtype=np.int64)) % int(np.prod(rest)) == 0


def _concat_fits(op: tf.Operation) -> bool:
    """A concatenation raises where its inputs' ranks or dimensions off its axis differ. Where the
    axis dimension is known only at run time, it cannot raise if every other is known and agrees."""
    if _shapes_fixed(op):
        return _parameters_valid(op)
    axis = static_value(op.inputs[-1])
    shapes = [t.shape for t in op.inputs[:-1]]
    if axis is None or any(s.rank is None for s in shapes) or len({s.rank for s in shapes}) != 1:
        return False
    rank = shapes[0].rank
    if not -rank <= int(axis) < rank:
        return False
    others = [[d for i, d in enumerate(s.as_list()) if i != int(axis) % rank] for s in shapes]
    return all(None not in dims and dims == others[0] for dims in others)


# Ops of one data input whose axis, permutation or multiples are checked against its rank only:
# with the rank known, dimensions known only at run time cannot make them raise (an arg-max can:
# over an empty dimension).
_RANK_ONLY = frozenset({"Sum", "Mean", "Max", "Min", "Prod", "Any", "All", "Transpose", "ExpandDims", "Tile"})


def _tile_no_larger(op: tf.Operation) -> bool:
    """A tiling raises where its output's size overflows int64 ("Expected a non-negative size"):
    an empty input of a dimension known only at run time may be of any size (``[2**62, 0]``
    tiled by ``[2, 1]``). With fixed shapes TF's shape function checks it while building; with
    a dimension unknown, only multiples of 0 or 1 are sure not to overflow."""
    return _shapes_fixed(op) or bool(np.all(np.asarray(static_value(op.inputs[1])) <= 1))


# Ops that read their input's shape: with an int32 ``out_type`` they raise where a dimension
# (``Shape``, ``ShapeN``) or the element count (``Size``) is not below 2**31 - 1 ("Shape output
# type is 32-bit but dim 0 is 2147483647"), which an empty tensor of a dimension known only at
# run time may have (``[2**31 - 1, 0]``). They cannot raise where that is checked on fixed shapes.
_SHAPE_READS = frozenset({"Shape", "ShapeN", "Size"})
_INT32_LIMIT = 2**31 - 1


def _shape_fits_out_type(op: tf.Operation) -> bool:
    if op.get_attr("out_type") != tf.int32:
        return True
    shapes = [t.shape for t in op.inputs]
    if not all(s.is_fully_defined() for s in shapes):
        return False
    if op.type == "Size":
        return shapes[0].num_elements() < _INT32_LIMIT
    return all(d < _INT32_LIMIT for s in shapes for d in s.as_list())


def _inputs_fixed(op: tf.Operation) -> bool:
    """Ops whose outputs' sizes depend on their inputs' values: fixed input shapes suffice."""
    return all(t.shape.is_fully_defined() for t in op.inputs)


_SHAPE_CHECKED = {"Reshape": _reshape_fits, "ConcatV2": _concat_fits, "ComputeAccidentalHits": _inputs_fixed}


def _slice_in_bounds(op: tf.Operation) -> bool:
    """``tf.slice(x, begin, size)`` raises where ``0 <= begin`` and ``begin + size <= dim`` fail."""
    begin, size = static_value(op.inputs[1]), static_value(op.inputs[2])
    if begin is None or size is None:
        return False
    dims = np.array(op.inputs[0].shape.as_list())
    size = np.where(size == -1, dims - begin, size)
    return begin.shape == dims.shape == size.shape and bool(np.all((begin >= 0) & (size >= 0) & (begin + size <= dims)))


def _strided_slice_known(op: tf.Operation) -> bool:
    """A strided slice (or its gradient) whose begin, end and strides are known and in range.

    TF's shape function checks them against the fixed shape, but only where TF's own constant
    folding knows them while building, which ``static_value`` may outdo (a ``ShapeN``): the
    check is run here on the known values, in a scratch graph. ``StridedSliceGrad``'s shape
    comes first, and its gradient must have the slice's shape."""
    grad = op.type == "StridedSliceGrad"
    known = [static_value(t) for t in (op.inputs[:4] if grad else op.inputs[1:4])]
    if any(value is None for value in known):
        return False
    shape = tuple(int(d) for d in known.pop(0)) if grad else tuple(op.inputs[0].shape.as_list())
    masks = tuple(op.get_attr(name) for name in STRIDED_SLICE_MASKS)
    sliced = _strided_slice_shape(shape, *(tuple(int(v) for v in value.ravel()) for value in known), masks)
    return sliced is not None and (not grad or sliced == tuple(op.inputs[4].shape.as_list()))


@functools.lru_cache(maxsize=4096)
def _strided_slice_shape(shape: tuple, begin: tuple, end: tuple, strides: tuple, masks: tuple) -> tuple | None:
    """The shape of such a strided slice of a tensor of ``shape``, None where it raises."""
    with tf.Graph().as_default():
        try:
            sliced = tf.raw_ops.StridedSlice(
                input=tf.compat.v1.placeholder(tf.float32, shape),
                begin=tf.constant(begin, tf.int64, [len(begin)]),
                end=tf.constant(end, tf.int64, [len(end)]),
                strides=tf.constant(strides, tf.int64, [len(strides)]),
                **dict(zip(STRIDED_SLICE_MASKS, masks)),
            )
        except (ValueError, tf.errors.InvalidArgumentError):
            return None  # out of range, or a zero stride: it raises at run time
    return tuple(sliced.shape.as_list())


def _paddings_non_negative(op: tf.Operation) -> bool:
    """``tf.pad`` raises on negative paddings (constant mode; ``MirrorPad`` has more limits)."""
    paddings = static_value(op.inputs[1])
    return paddings is not None and bool(np.all(paddings >= 0))


def _rng_algorithm_on_cpu(op: tf.Operation) -> bool:
    """A ``tf.random.Generator``'s read-and-skip raises only for an algorithm this device lacks
    (ThreeFry off XLA, an unknown id); Philox (1) and auto-select (3) run everywhere."""
    algorithm = static_value(op.inputs[1])
    return algorithm is not None and int(algorithm) in (1, 3)


def _indices_checked_by_a_gather(op: tf.Operation) -> bool:
    """A scatter into a variable raises where an index is out of its first dimension (or the updates'
    shape does not fit). Its indices cannot be out of range where a gather created before it in the
    same graph took the same values (through reshapes and widening casts) from a tensor whose first
    dimension is no larger: the scatter waits for that gather, which may raise, and runs only if the
    gather did not (``ordering.order_writes_after_earlier_ops``). An embedding's sparse update: its
    gradient's indices are the lookup's ids."""
    rows = _first_dimension(op.inputs[0])
    indices, updates = op.inputs[1], op.inputs[2]
    if rows is None or rows.rank is None:
        return False
    expected = indices.shape.concatenate(rows[1:])
    if updates.shape.rank != 0 and updates.shape.as_list() != expected.as_list():
        return False
    bounds = _gathered_bounds(op)
    return _within(indices, rows[0], bounds)


def _gathered_bounds(op: tf.Operation) -> dict[object, int]:
    """For the indices of every gather created before ``op`` in its graph (traced to where their
    values come from): the smallest first dimension a gather took them from."""
    bounds: dict[tf.Tensor, int] = {}
    for gather in op.graph.get_operations():
        if gather._id >= op._id:
            break
        if gather.type not in _GATHERS:
            continue
        # Batch dimensions check the ids against a later dimension, not the first: both kinds have them
        # (``tf.raw_ops.ResourceGather(..., batch_dims=1)`` vouched for ids up to the second dimension).
        if gather.get_attr("batch_dims") != 0:
            continue
        if gather.type == "GatherV2" and static_value(gather.inputs[2]) != 0:
            continue
        taken = gather.inputs[0].shape if gather.type == "GatherV2" else _first_dimension(gather.inputs[0])
        if taken is not None and taken.rank and taken[0] is not None:
            source = _same_values(gather.inputs[1]).ref()
            bounds[source] = min(bounds.get(source, taken[0]), taken[0])
    return bounds


def _within(indices: tf.Tensor, rows: int, bounds: dict[object, int]) -> bool:
    """Every value of ``indices`` was taken by such a gather from no more than ``rows`` rows: its own
    values, or each part of a concatenation of them (a gradient's indices over several lookups).
    ``bounds`` is keyed by the tensors' ``ref()``."""
    source = _same_values(indices)
    if source.ref() in bounds:
        return bounds[source.ref()] <= rows
    if source.op.type == "ConcatV2":
        return all(_within(part, rows, bounds) for part in source.op.inputs[:-1])
    return False


_GATHERS = frozenset({"GatherV2", "ResourceGather"})
_SAME_VALUES = frozenset({"Identity", "Reshape", "Squeeze", "ExpandDims"})


def _same_values(tensor: tf.Tensor) -> tf.Tensor:
    """The tensor ``tensor``'s values come from unchanged: through reshapes, identities and casts of
    int32 to int64."""
    while True:
        op = tensor.op
        widening = op.type == "Cast" and op.inputs[0].dtype == tf.int32 and tensor.dtype == tf.int64
        if op.type not in _SAME_VALUES and not widening:
            return tensor
        tensor = op.inputs[0]


def _first_dimension(resource: tf.Tensor) -> tf.TensorShape | None:
    """The fixed shape of the variable behind a resource handle, None where it is not known."""
    data = handle_data_util.get_resource_handle_data(resource)
    if data is None or not data.is_set or len(data.shape_and_type) != 1:
        return None
    shape = tf.TensorShape(data.shape_and_type[0].shape)
    return shape if shape.is_fully_defined() and shape.rank else None


_CHECKED_BOUNDS = {
    **dict.fromkeys(
        (
            "ResourceScatterAdd",
            "ResourceScatterSub",
            "ResourceScatterUpdate",
            "ResourceScatterMin",
            "ResourceScatterMax",
        ),
        _indices_checked_by_a_gather,
    ),
    "RngReadAndSkip": _rng_algorithm_on_cpu,
    "Slice": _slice_in_bounds,
    "StridedSlice": _strided_slice_known,
    "StridedSliceGrad": _strided_slice_known,
    "Pad": _paddings_non_negative,
    "PadV2": _paddings_non_negative,
}
_CONTROL_FLOW = frozenset({"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase"})
_DIVISIONS = frozenset({"FloorMod", "FloorDiv", "TruncateMod", "TruncateDiv", "Mod", "Div"})
_CONSOLE_STREAMS = frozenset({b"stderr", b"stdout", b"log(info)", b"log(warning)", b"log(error)"})
_FUNCTION_ATTRS = ("then_branch", "else_branch", "branches", "cond", "body", "f")


def _shapes_fixed(op: tf.Operation) -> bool:
    return all(t.shape.is_fully_defined() for t in (*op.inputs, *op.outputs) if t.dtype != tf.resource)


def _divisor_may_be_zero(op: tf.Operation) -> bool:
    """Integer division by zero raises (float division gives inf or nan)."""
    if op.inputs[1].dtype.is_floating:
        return False
    divisor = static_value(op.inputs[1])
    return divisor is None or bool(np.any(divisor == 0))


def _exponent_may_be_negative(op: tf.Operation) -> bool:
    """An integer raised to a negative integer power raises (a float one gives a float)."""
    exponent = static_value(op.inputs[1])
    return exponent is None or bool(np.any(exponent < 0))


def _body_may_raise(op: tf.Operation) -> bool:
    """Whether an op of a tf.cond's branches or a loop's body and condition may raise."""
    bodies = called_graphs(op)
    return bodies is None or any(may_raise(inner) for body in bodies for inner in body.get_operations())


def called_graphs(op: tf.Operation) -> list[tf.Graph] | None:
    """The graphs of a control-flow op's branches, body and condition, or of a function call op's
    function (None where one cannot be found; empty for other ops)."""
    graphs = []
    for attr in _FUNCTION_ATTRS:
        try:
            value = op.get_attr(attr)
        except ValueError:  # this kind of control flow has no such attribute
            continue
        for function in value if isinstance(value, list) else [value]:
            body = _function_graph(op.graph, function.name)
            if body is None:
                return None
            graphs.append(body)
    return graphs


def _function_graph(graph: tf.Graph, name: str) -> tf.Graph | None:
    """The graph of the function ``name`` called in ``graph`` (None where it cannot be found)."""
    while graph is not None:
        function = graph._get_function(name)
        if function is not None:
            return getattr(function, "graph", None)
        graph = getattr(graph, "outer_graph", None)
    return None
