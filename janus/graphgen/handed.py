"""Functions handed to TensorFlow APIs that call them while the graph is built.

``tf.cond(p, lambda: a * 2.0, lambda: b - 1.0)``, ``tf.map_fn(lambda r: r * 2.0, x)``,
``tf.while_loop(cond, body, loop_vars)``, ``tf.switch_case(i, branches)``,
``tf.scan``/``tf.foldl``/``tf.foldr`` and an optimizer's ``minimize(loss_fn, var_list)`` take the
user's functions (lambdas, nested ``def``s, user functions and methods, partials of them) and call
them while they build their branch and loop graphs. janus hands them a ``Handed`` callable instead:
when TF calls it, the interpreter converts the function's body into the graph TF is building, so no
user code runs. ``tf.cond`` on a Python bool calls only the function eager calls, as eager does.

Eager runs the branch it takes, and the body once per iteration, as Python; TF traces every
branch, and the body once. So, as in janus's own ``tf.cond``, whatever the function would do to
Python is refused (heap writes, ``print``, ``nonlocal`` writes, changes to lists and dicts the
function can see), and so is anything eager and the graph would answer differently:

- a result that is not tensors: ``tf.cond(p, lambda: 1.0, ...)`` is the float 1.0 in eager;
- ``tf.while_loop`` variables that are not tensors (eager runs the loop on Python numbers) and a
  body that returns another structure than ``loop_vars`` (eager's result takes the body's);
- a function TF did not call while building (``tf.py_function`` calls it when the graph runs);
- the result of ``minimize`` used (eager's is None, a graph's an op), a v1 ``minimize`` of a
  tensor (eager raises);
- any other library call handed a function: janus does not know when it would call it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import types
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import gast
import numpy as np
import tensorflow as tf
from tensorflow.python.ops.control_flow_util_v2 import CondBranchFuncGraph

from janus.graphgen.errors import NotConvertible, RaisesHere
from janus.graphgen.ordering import branch_outputs_fallible, is_control_flow
from janus.ops.assert_op import CHECK_OPS
from janus.source import purity
from janus.source.library import is_user_function

if TYPE_CHECKING:
    from janus.graphgen.interpreter import Frame, Interpreter

# Why a function's result is refused (None: it is fine), given the call's bound arguments.
ResultCheck = Callable[[object, inspect.BoundArguments], "str | None"]


@dataclasses.dataclass(frozen=True)
class _Contract:
    """Which parameters of a TF API hold functions, and what each function must return."""

    name: str  # as users write it
    results: dict[str, ResultCheck]  # parameter -> check of what its functions return
    arguments: Callable[[inspect.BoundArguments], str | None] = lambda bound: None
    # The one function eager calls as plain Python, when the arguments decide it now (else None).
    called_now: Callable[[inspect.BoundArguments], str | None] = lambda bound: None
    statement_only: bool = False  # its result in eager is not what the graph gives: only unused
    needs_function: bool = False  # without a function, eager and the graph take different paths


def _leaves(value: object) -> list[object]:
    """The leaves of ``value`` through lists, tuples (namedtuples too) and dicts, as ``tf.nest`` sees them."""
    if isinstance(value, (list, tuple)) and (type(value) in (list, tuple) or hasattr(value, "_fields")):
        return [leaf for item in value for leaf in _leaves(item)]
    if type(value) is dict:
        return [leaf for key in sorted(value) for leaf in _leaves(value[key])]
    return [value]


def _tensors(result: object, bound: inspect.BoundArguments | None = None) -> str | None:
    leaves = _leaves(result)
    if not leaves:
        return "returns no tensor"
    others = [leaf for leaf in leaves if not isinstance(leaf, tf.Tensor)]
    if others:
        return f"returns a {type(others[0]).__name__}, which eager keeps as it is and the graph makes a tensor"
    return None


def _same_structure(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)) and (type(a) in (list, tuple) or hasattr(a, "_fields")):
        return len(a) == len(b) and all(_same_structure(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return a.keys() == b.keys() and all(_same_structure(a[k], b[k]) for k in a)
    return True


def _branch_taken_now(bound: inspect.BoundArguments) -> str | None:
    """``tf.cond(True, f, g)``: eager calls ``f`` alone and returns what it returns."""
    pred = bound.arguments.get("pred")
    if type(pred) in (bool, int) or isinstance(pred, np.bool_):
        return "true_fn" if pred else "false_fn"
    return None


def _loop_vars(bound: inspect.BoundArguments) -> str | None:
    loop_vars = bound.arguments.get("loop_vars")
    if type(loop_vars) not in (list, tuple):
        return "its loop_vars are not a list or tuple"
    if _tensors(loop_vars) is not None:
        return "its loop_vars are not all tensors (eager would run the loop on Python values)"
    return None


def _loop_test(result: object, bound: inspect.BoundArguments) -> str | None:
    if not isinstance(result, tf.Tensor) or result.dtype != tf.bool or result.shape.rank != 0:
        return "returns something other than a boolean scalar tensor"
    return None


def _loop_body(result: object, bound: inspect.BoundArguments) -> str | None:
    if not _same_structure(result, bound.arguments["loop_vars"]):
        return "returns another structure than loop_vars (eager's result would take the body's)"
    return _tensors(result)


@functools.cache
def _contracts() -> tuple[tuple[object, _Contract], ...]:
    one = {"fn": _tensors}
    return (
        (tf.cond, _Contract("tf.cond", {"true_fn": _tensors, "false_fn": _tensors}, called_now=_branch_taken_now)),
        (tf.switch_case, _Contract("tf.switch_case", {"branch_fns": _tensors, "default": _tensors})),
        (tf.map_fn, _Contract("tf.map_fn", one)),
        (tf.vectorized_map, _Contract("tf.vectorized_map", one)),
        (tf.scan, _Contract("tf.scan", one)),
        (tf.foldl, _Contract("tf.foldl", one)),
        (tf.foldr, _Contract("tf.foldr", one)),
        (tf.while_loop, _Contract("tf.while_loop", {"cond": _loop_test, "body": _loop_body}, _loop_vars)),
    )


_MINIMIZE = _Contract("minimize", {"loss": _tensors}, statement_only=True)
_V1_MINIMIZE = dataclasses.replace(_MINIMIZE, needs_function=True)


def _contract(callee: object) -> _Contract | None:
    owner = getattr(callee, "__self__", None)
    if getattr(callee, "__name__", "") == "minimize" and isinstance(callee, types.MethodType):
        if purity.is_v1_optimizer(owner):
            return _V1_MINIMIZE
        return _MINIMIZE if type(owner).__module__.startswith("tf_keras.") else None
    return next((contract for api, contract in _contracts() if api is callee), None)


def must_hand(callee: object) -> bool:
    """A call that must go through ``call`` even without a function among its arguments."""
    contract = _contract(callee)
    return contract is not None and contract.needs_function


def is_function(value: object) -> bool:
    """A function janus converts: a lambda or nested ``def``, a user function or method, a partial of one."""
    if isinstance(value, functools.partial):
        return is_function(value.func)
    return type(value).__name__ == "LocalFunction" or is_user_function(value)


def holds_function(value: object) -> bool:
    if type(value) in (list, tuple, dict):
        return any(holds_function(v) for v in (value.values() if type(value) is dict else value))
    return is_function(value)


class Handed:
    """Stands in for a user function handed to a TF API: each call TF makes is converted."""

    def __init__(self, target: object, convert: Callable[[Handed, list, dict], object], api: str) -> None:
        self.__name__ = self.__qualname__ = _name_of(target)
        self.__doc__ = None
        self.target = target
        self.api = api
        self._convert = convert
        self.calls = 0
        self.asserted = False  # the converted body planted a JanusAssert
        self.active = True

    def __call__(self, *args: object, **kwargs: object) -> object:
        if not self.active:
            raise NotConvertible(f"{self.api}() kept {self.__name__} and called it after it returned")
        self.calls += 1
        return self._convert(self, list(args), kwargs)

    def __repr__(self) -> str:
        return f"<converted {self.__name__}>"


def _name_of(target: object) -> str:
    if isinstance(target, functools.partial):
        return _name_of(target.func)
    node = getattr(target, "node", None)  # a LocalFunction
    if node is not None:
        return getattr(node, "name", "<lambda>")
    return getattr(target, "__name__", "function")


def call(
    interp: Interpreter,
    frame: Frame,
    node: gast.AST,
    callee: object,
    args: list,
    kwargs: dict,
    loc: str,
    statement: bool,
) -> object:
    """``callee(*args, **kwargs)``, a TF API handed functions: each is converted when TF calls it.
    ``statement``: the call's result is unused."""
    if callee is tf.nest.map_structure:
        return _map_structure(interp, frame, node, args, kwargs, loc)
    contract = _contract(callee)
    if contract is None:
        api = purity.qualified_name(callee)
        raise NotConvertible(
            f"a function handed to {api}(), which janus does not know to call it only while the graph is built", loc
        )
    api = contract.name
    try:
        bound = inspect.signature(callee).bind(*args, **kwargs)
    except TypeError as err:
        raise NotConvertible(f"{api}() called with arguments it does not take: {err}", loc) from None
    if contract.statement_only and not statement:
        raise NotConvertible(f"the result of {api}() is used (eager's differs from a graph's)", loc)
    if contract.needs_function and not any(holds_function(bound.arguments.get(p)) for p in contract.results):
        raise NotConvertible(f"{api}() without a function (eager takes another path)", loc)
    taken = contract.called_now(bound)
    if taken is not None:  # eager calls it as plain Python, the other not at all
        function = bound.arguments.get(taken)
        if not callable(function) and not is_function(function):
            raise NotConvertible(f"{api}() of a {taken} that is not a function", loc)
        return interp.call(frame, node, function, [], {})
    why = contract.arguments(bound)
    if why is not None:
        raise NotConvertible(f"{api}(): {why}", loc)
    handed: list[Handed] = []

    def hand(target: object, check: ResultCheck) -> Handed:
        def convert(fn: Handed, call_args: list, call_kwargs: dict) -> object:
            result = _converted(interp, frame, node, fn, call_args, call_kwargs, loc)
            why = check(result, bound)
            if why is not None:
                raise NotConvertible(f"{fn.__name__}, handed to {api}(), {why}", loc)
            return result

        handed.append(Handed(target, convert, api))
        return handed[-1]

    for name, value in bound.arguments.items():
        check = contract.results.get(name)
        if check is not None:
            bound.arguments[name] = _replace_functions(value, lambda fn, check=check: hand(fn, check))
        elif holds_function(value):
            raise NotConvertible(f"a function in argument {name!r} of {api}()", loc)
    graph = tf.compat.v1.get_default_graph()
    first = len(graph.get_operations())
    try:
        with _variable_scope_kept():
            result = interp.call_graph_library(callee, list(bound.args), dict(bound.kwargs), loc)
    finally:
        for fn in handed:
            fn.active = False
    uncalled = [fn.__name__ for fn in handed if not fn.calls]
    if uncalled:
        raise NotConvertible(f"{api}() did not call {', '.join(uncalled)} while the graph was built", loc)
    if any(fn.asserted for fn in handed):
        _order_after_assertions(interp, graph.get_operations()[first:], api, loc)
    return None if contract.statement_only else result


def _map_structure(interp: Interpreter, frame: Frame, node: gast.AST, args: list, kwargs: dict, loc: str) -> object:
    """``tf.nest.map_structure(fn, *structures)``: plain Python in eager, calling ``fn`` once per leaf in
    ``tf.nest.flatten`` order, right there: each call is converted inline, as a call of ``fn`` would be
    (no region: its effects happen as eager's do)."""
    if not args or set(kwargs) - {"check_types", "expand_composites"} or kwargs.get("expand_composites"):
        raise NotConvertible("tf.nest.map_structure() with arguments janus does not convert", loc)
    fn, *structures = args
    if not structures:
        raise NotConvertible("tf.nest.map_structure() without a structure (eager raises)", loc)
    structures = [_materialized(s) for s in structures]
    try:
        for other in structures[1:]:
            tf.nest.assert_same_structure(structures[0], other, check_types=kwargs.get("check_types", True))
    except (TypeError, ValueError) as err:
        raise RaisesHere(f"tf.nest.map_structure() raises {type(err).__name__} in eager", loc) from None
    results = [interp.call(frame, node, fn, list(leaves), {}) for leaves in zip(*map(tf.nest.flatten, structures))]
    return tf.nest.pack_sequence_as(structures[0], results)


def _materialized(value: object) -> object:
    """Heap lists as this call sees them, through lists, tuples and dicts."""
    if hasattr(value, "materialize"):
        value = value.materialize()
    if type(value) in (list, tuple):
        return type(value)(_materialized(v) for v in value)
    if type(value) is dict:
        return {k: _materialized(v) for k, v in value.items()}
    return value


@contextlib.contextmanager
def _variable_scope_kept() -> Iterator[None]:
    """tf.map_fn, tf.scan and tf.foldl/foldr set a caching device on the variable scope, which eager
    shares, and unset it only when the function returns: a refusal raised from the function would
    leave it set, and eager's next variable_scope (a v1 optimizer's slots) would fail."""
    scope = tf.compat.v1.get_variable_scope()
    caching_device = scope.caching_device
    try:
        yield
    except BaseException:
        scope._caching_device = caching_device  # noqa: SLF001 - set_caching_device refuses in eager
        raise


def _replace_functions(value: object, hand: Callable[[object], Handed]) -> object:
    if type(value) in (list, tuple):
        return type(value)(_replace_functions(v, hand) for v in value)
    if type(value) is dict:
        return {k: _replace_functions(v, hand) for k, v in value.items()}
    return hand(value) if is_function(value) else value


def _converted(
    interp: Interpreter, frame: Frame, node: gast.AST, fn: Handed, args: list, kwargs: dict, loc: str
) -> object:
    """The function's body converted into the graph TF is building: a region, like a tf.cond branch."""
    saved = _snapshot(interp.closure_values(fn.target))
    with interp.ctx.nested_graph() as asserts:
        try:
            result = interp.call(frame, node, fn.target, args, kwargs)
        finally:
            changed = _restore(saved)
        fn.asserted |= bool(asserts)
    graph = tf.compat.v1.get_default_graph()
    if isinstance(graph, CondBranchFuncGraph):  # a tf.cond branch: what waits on the cond waits for it
        branch_outputs_fallible(graph)
    if changed:
        raise NotConvertible(f"{fn.__name__}, handed to {fn.api}(), changes a list or dict it can see", loc)
    return result


def _snapshot(values: Iterator[object]) -> list[tuple[object, object]]:
    """Shallow copies of the lists, dicts and sets among ``values`` and within them."""
    saved: list[tuple[object, object]] = []
    seen: set[int] = set()
    pending = list(values)
    while pending:
        value = pending.pop()
        if type(value) not in (list, dict, set, tuple) or id(value) in seen:
            continue
        seen.add(id(value))
        if type(value) is not tuple:
            saved.append((value, value.copy()))
        pending.extend(value.values() if type(value) is dict else value)
    return saved


def _restore(saved: list[tuple[object, object]]) -> bool:
    """Puts the containers back as they were; whether any had changed."""
    changed = False
    for container, contents in saved:
        if type(container) is dict:
            same = container.keys() == contents.keys() and all(container[k] is contents[k] for k in contents)
        elif type(container) is list:
            same = len(container) == len(contents) and all(a is b for a, b in zip(container, contents))
        else:
            same = {id(v) for v in container} == {id(v) for v in contents}
        if same:
            continue
        changed = True
        container.clear()
        if type(container) is list:
            container.extend(contents)
        else:
            container.update(contents)
    return changed


def _order_after_assertions(interp: Interpreter, new_ops: list[tf.Operation], api: str, loc: str) -> None:
    """Assertions planted in the functions must run before the state updates that follow.

    They live in the branch and loop graphs TF built (or in this graph): the control-flow ops
    (or assertions) that ``api`` added to this graph carry them."""
    carriers = [op for op in new_ops if is_control_flow(op) or op.type in CHECK_OPS]
    if not carriers:
        raise NotConvertible(f"assumptions inside the functions handed to {api}() cannot be ordered", loc)
    interp.ctx.assert_ops.extend(carriers)
