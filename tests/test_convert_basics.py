"""Differential tests for the [core] constructs: every output compared with eager, graphs asserted."""

import numpy as np
import pytest
import tensorflow as tf
from differential import no_state, run_differential

import janus


def tensors(*shape, n=6, dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    return [tf.constant(rng.normal(size=shape).astype(dtype)) for _ in range(n)]


def pairs(*shape, n=6):
    return list(zip(tensors(*shape, n=n), tensors(*shape, n=n, seed=1)))


def plain(fn):
    return lambda: (fn, no_state)


def test_linear_model_literals_and_arithmetic():
    def loss_fn(x, y):
        y_ = 0.5 * x + 1.5
        return (y_ - y) ** 2

    run_differential(plain(loss_fn), pairs(4, 8), min_graph_calls=3)


def test_python_only_arithmetic_is_folded():
    def f(x):
        scale = (2 + 3) * 0.5 // 1
        offset = 10 % 4 - 2**3 / 8
        return x * scale + offset

    jitted = run_differential(plain(f), [(t,) for t in tensors(3)])
    code = jitted.cache.entries[0].graph.code
    assert "mul(a0, 2.0)" in code and "add(t" in code and ", 1.0)" in code, code


def test_comparisons_and_unary_and_bitwise():
    def f(x, n):
        neg = -x
        pos = x + 0.0
        bigger = x > 0.0
        small = tf.abs(x) <= 1.0
        both = tf.logical_and(bigger, small)
        return neg, pos, both, ~n, n & 3, n | 8

    ints = [tf.constant(np.arange(4, dtype="int32") + i) for i in range(6)]
    run_differential(plain(f), list(zip(tensors(4), ints)))


def test_locals_tuple_unpacking_and_starred():
    def f(x, y):
        a, b = x, y
        (c, d), e = (a + b, a - b), a * b
        first, *rest = [c, d, e]
        *init, last = (first, *rest)
        return init, last, len(rest)

    run_differential(plain(f), pairs(2, 3))


def test_returns_tuple_list_dict_and_constants():
    def f(x, y):
        return {"sum": x + y, "pair": (x, [y, x * y]), "name": "janus", "n": 3, "none": None}

    run_differential(plain(f), pairs(5))


def test_returned_local_list_is_fresh_each_call():
    def f(x):
        return [1, 2], x

    jitted = janus.jit(f)
    outs = [jitted(t)[0] for t in tensors(2)]
    assert janus.stats(jitted)["graph_calls"] >= 2
    outs[-1].append(3)
    assert outs[-2] == [1, 2]


def test_tf_api_calls_with_keywords():
    def f(x, y):
        m = tf.matmul(x, y, transpose_b=True)
        s = tf.reduce_sum(m, axis=1, keepdims=True)
        return tf.nn.relu(s) + tf.reduce_mean(tf.concat([x, y], axis=0))

    run_differential(plain(f), pairs(3, 4))


def test_tensor_attributes_methods_and_indexing():
    def f(x):
        rows = x.shape[0]
        return x[0], x[1:, ::2], x[..., -1], tf.reshape(x, [rows, -1]), x.dtype.name, x.ndim

    run_differential(plain(f), [(t,) for t in tensors(3, 4)])


def helper(a, b, scale=2.0):
    return (a - b) * scale


def test_inlined_user_functions_with_defaults_and_keywords():
    def f(x, y):
        return helper(x, y) + helper(b=x, a=y, scale=0.5)

    jitted = run_differential(plain(f), pairs(4))
    assert "helper" not in jitted.cache.entries[0].graph.code  # inlined, not called


def test_closures_and_local_functions_and_lambdas():
    def make():
        factor = 3.0

        def f(x):
            def inner(v, k=1.0):
                return v * factor + k

            sq = lambda v: v * v  # noqa: E731
            return inner(x), sq(x), inner(x, k=2.0) if False else inner(x, 2.0)

        return f, no_state

    run_differential(make, [(t,) for t in tensors(3)])


def test_comprehensions_and_builtins():
    def f(xs, w):
        scaled = [x * w for x in xs if x is not None]
        total = sum(scaled)
        named = {f"x{i}": v for i, v in enumerate(scaled)}
        pairs_ = list(zip(range(len(scaled)), scaled))
        return total, named, pairs_[-1], max(1, len(xs)), abs(w), isinstance(w, tf.Tensor)

    calls = [
        ([a, b, c], w) for a, b, c, w in zip(tensors(2), tensors(2, seed=3), tensors(2, seed=4), tensors(2, seed=5))
    ]
    run_differential(plain(f), calls)


def test_static_branches_and_loops_are_folded():
    def f(x, mode, n):
        if mode == "double":
            x = x * 2
        elif mode == "half":
            x = x / 2
        else:
            x = -x
        for i in range(n):
            if i % 2 == 0:
                continue
            x = x + i
        while n > 0:
            n -= 1
            if n == 1:
                break
        return x, n

    calls = [(t, "double", 4) for t in tensors(3, n=4)] + [(t, "half", 4) for t in tensors(3, n=2)]
    run_differential(plain(f), calls)


def test_for_over_tensor_with_static_first_dimension():
    def f(x):
        acc = tf.zeros([3])
        for row in x:
            acc = acc + row
        return acc

    run_differential(plain(f), [(t,) for t in tensors(4, 3)])


def test_gradient_tape_inside_converted_function():
    def f(x, w):
        with tf.GradientTape() as tape:
            tape.watch(w)
            y = tf.reduce_sum(tf.tanh(x * w))
        return y, tape.gradient(y, w)

    run_differential(plain(f), pairs(5))


def test_gradient_through_jitted_function_called_under_outer_tape():
    def f(x, w):
        return tf.reduce_sum(tf.sin(x) * w)

    jitted = janus.jit(f)
    for x, w in pairs(4):
        with tf.GradientTape() as tape:
            tape.watch(w)
            y = jitted(x, w)
        with tf.GradientTape() as tape2:
            tape2.watch(w)
            y2 = f(x, w)
        np.testing.assert_allclose(tape.gradient(y, w), tape2.gradient(y2, w), rtol=1e-5)
        np.testing.assert_allclose(y, y2, rtol=1e-5)
    assert janus.stats(jitted)["graph_calls"] >= 2


def test_variables_read_and_updated():
    def make():
        v = tf.Variable(tf.ones([3]))

        def f(x):
            v.assign_add(x)
            return v * 2.0, v.read_value()

        return f, lambda: v.numpy()

    run_differential(make, [(t,) for t in tensors(3)])


class Scaler:
    def __init__(self, k):
        self.k = k
        self.w = tf.constant([1.0, 2.0, 3.0]) * k

    @janus.jit
    def apply(self, x):
        return x * self.k + self.w


def test_jit_on_methods_is_per_instance():
    a, b = Scaler(2.0), Scaler(-1.0)
    for t in tensors(3, n=5):
        np.testing.assert_allclose(a.apply(t), t * 2.0 + a.w, rtol=1e-6)
        np.testing.assert_allclose(b.apply(t), t * -1.0 + b.w, rtol=1e-6)
    stats = janus.stats(a.apply)
    assert stats is not None and stats["graph_calls"] >= 4, janus.explain(a.apply)


class Plain:
    def __init__(self, k):
        self.k = k

    def apply(self, x):
        return x + self.k


def test_jit_of_unbound_method_with_explicit_self():
    jitted = janus.jit(Plain.apply)
    obj = Plain(4.0)
    for t in tensors(2):
        np.testing.assert_allclose(jitted(obj, t), t + 4.0)
    assert janus.stats(jitted)["graph_calls"] >= 2


def test_heap_attribute_change_is_guarded():
    obj = Plain(1.0)
    jitted = janus.jit(Plain.apply)
    x = tf.constant([1.0, 2.0])
    for k in [1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 7.0]:
        obj.k = k
        np.testing.assert_allclose(jitted(obj, x), x + k)
    assert janus.stats(jitted)["graph_calls"] >= 2


def test_heap_tensor_read_fresh_every_call():
    box = Plain(tf.constant([0.0, 0.0]))
    jitted = janus.jit(Plain.apply)
    x = tf.constant([1.0, 2.0])
    for i in range(6):
        box.k = tf.constant([float(i), -float(i)])
        np.testing.assert_allclose(jitted(box, x), x + box.k)
    assert janus.stats(jitted)["graph_calls"] >= 3


COUNTER = []


def test_global_scalar_change_is_guarded():
    def f(x):
        return x * SCALE

    global SCALE
    jitted = janus.jit(f)
    x = tf.constant(2.0)
    for SCALE in [1.0, 1.0, 1.0, 1.0, 3.0, 3.0, 3.0]:  # noqa: B007
        assert float(jitted(x)) == 2.0 * SCALE
    assert janus.stats(jitted)["graph_calls"] >= 3


SCALE = 1.0


def test_nested_jit_functions_are_inlined():
    @janus.jit
    def inner(x):
        return x * 3.0

    def outer(x):
        return inner(x) + 1.0

    run_differential(plain(outer), [(t,) for t in tensors(2)])


@pytest.mark.parametrize("value", [1, 2.5, True, "s", None])
def test_python_scalar_arguments_are_specialised(value):
    def f(x, v):
        if v is None:
            return x
        if isinstance(v, str):
            return x, v + "!"
        return x * v

    run_differential(plain(f), [(t, value) for t in tensors(2)])


def test_dict_and_nested_container_arguments():
    def f(batch, cfg):
        x, y = batch["x"], batch["y"]
        out = x * cfg["scale"] + y
        return {"out": out, "n": len(batch), "keys": sorted(batch)}, [v * 2.0 for v in cfg["extra"]]

    calls = [({"x": a, "y": b}, {"scale": 2.0, "extra": (a, b)}) for a, b in pairs(3)]
    run_differential(plain(f), calls)


class Holder:
    def __init__(self):
        self.w = tf.constant([1.0, 2.0])


HOLDERS = {}


def read_holder(x):
    return x * HOLDERS["h"].w


def test_objects_referenced_by_a_cached_graph_stay_alive_until_reset():
    import gc
    import weakref

    HOLDERS["h"] = Holder()
    ref = weakref.ref(HOLDERS["h"])
    jitted = janus.jit(read_holder)
    for _ in range(5):
        jitted(tf.constant([3.0, 4.0]))
    assert janus.stats(jitted)["graph_calls"] >= 2
    del HOLDERS["h"]
    gc.collect()
    assert ref() is not None  # the cached graph's guards hold it: no dangling pointer
    janus.reset()
    gc.collect()
    assert ref() is None  # dropped together with the graph: no leak


def test_no_reference_leaks_over_10000_graph_calls():
    import sys

    from janus.ops import pyheap

    holder = Holder()
    items = [Holder() for _ in range(3)]

    def f(x, n):
        total = x * holder.w
        for i in range(n):  # run-time objects through the heap ops (pointers and stores)
            total = total + items[i].w
        return total

    jitted = janus.jit(f)
    calls = [(tf.constant([1.0, 1.0]), tf.constant(k)) for k in (1, 2, 3, 2, 1)]
    for args in calls:
        jitted(*args)
    before = sys.getrefcount(holder), [sys.getrefcount(i) for i in items], len(pyheap._stores)
    for k in range(10_000):
        jitted(*calls[k % len(calls)])
    after = sys.getrefcount(holder), [sys.getrefcount(i) for i in items], len(pyheap._stores)
    assert before == after
    assert janus.stats(jitted)["graph_calls"] >= 10_000
