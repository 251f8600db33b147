"""Differential tests for dynamic control flow: speculation, relaxation and tf.cond/tf.while_loop."""

import numpy as np
import pytest
import tensorflow as tf
from differential import no_state, run_differential

import janus


def plain(fn):
    return lambda: (fn, no_state)


def vec(*values):
    return tf.constant(values, tf.float32)


POS = [vec(1.0, 2.0), vec(3.0, 1.0), vec(0.5, 0.5), vec(2.0, 2.0)]
NEG = [vec(-1.0, -2.0), vec(-3.0, 0.5)]


def graph_kinds(jitted):
    ops = {op.type for op in jitted.cache.entries[0].graph.concrete.graph.get_operations()}
    return {"cond": bool(ops & {"If", "StatelessIf"}), "while": bool(ops & {"While", "StatelessWhile"})}


# ---------------------------------------------------------------- branches
def test_single_path_branch_is_inlined_then_flips_to_tf_cond():
    def f(x):
        if tf.reduce_sum(x) > 0:
            y = x * 2.0
        else:
            y = x - 1.0
        return y

    calls = [(x,) for x in POS] + [(NEG[0],)] + [(x,) for x in (POS + NEG) * 2]
    jitted = run_differential(plain(f), calls, min_graph_calls=8)
    stats = janus.stats(jitted)
    assert stats["assumption_failures"] == 1 and stats["fallbacks"] == 1  # flips stop causing fallbacks
    assert graph_kinds(jitted)["cond"]


def test_elif_chains_nested_ifs_and_returns_in_branches():
    def f(x, mode):
        s = tf.reduce_sum(x)
        if mode == "abs":
            if s > 0:
                return x
            return -x
        elif s > 2.0:
            if s > 4.0:
                return x * 3.0
            y = x * 2.0
        else:
            y = x
        return y + 1.0

    calls = [(x, m) for m in ("abs", "other") for x in POS + NEG + POS]
    run_differential(plain(f), calls, min_graph_calls=6)


def test_variable_defined_in_one_branch_behaves_like_eager():
    def f(x):
        if tf.reduce_sum(x) > 0:
            y = x + 1.0
        return y  # noqa: F821 - UnboundLocalError when the branch is not taken, in eager too

    calls = [(x,) for x in POS] + [(NEG[0],), (POS[0],), (NEG[1],)]
    jitted = run_differential(plain(f), calls, min_graph_calls=1)
    assert "local 'y' may be read before assignment" in janus.explain(jitted)


def test_branches_that_pick_equal_but_distinct_dicts_keep_which_one():
    """Two equal dicts are two objects, and two dicts with the same items in another order print
    differently: neither may stand for the other after a tensor-dependent ``if``."""
    first, second = {"a": 1}, {"a": 1}

    def pick(x):
        if tf.reduce_sum(x) > 0:
            d = first
        else:
            d = second
        return x, d is first

    def ordered(x):
        if tf.reduce_sum(x) > 0:
            d = {"a": 1, "b": 2}
        else:
            d = {"b": 2, "a": 1}
        return x, list(d)

    calls = [(POS[0],), (NEG[0],), (POS[1],), (NEG[1],), (POS[2],), (NEG[0],)]
    for fn in (pick, ordered):
        run_differential(plain(fn), calls, min_graph_calls=0)


def test_branches_that_leave_a_list_made_before_or_a_new_one_keep_eager_aliasing():
    """``p = a`` on one side, a new list on the other: after the ``if``, ``p is a`` and what a change
    through ``p`` does to ``a`` depend on the side taken, which no graph output can carry."""

    def alias(x):
        a = [1, 2]
        if tf.reduce_sum(x) > 0:
            p = a
        else:
            p = [1, 2]
        p[0] = 7
        return x, a[0], p is a

    def in_a_tuple(x):
        a = [1, 2]
        if tf.reduce_sum(x) > 0:
            pair = (a, 1)
        else:
            pair = ([1, 2], 2)
        pair[0].append(3)
        return x, len(a)

    def by_expression(x):
        a = [1, 2]
        p = a if tf.reduce_sum(x) > 0 else [3, 4]
        p.append(5)
        return x, len(a)

    calls = [(POS[0],), (NEG[0],), (POS[1],), (NEG[1],), (POS[2],), (POS[3],), (NEG[0],)]
    for fn in (alias, in_a_tuple, by_expression):
        jitted = run_differential(plain(fn), calls, min_graph_calls=0)
        assert "different lists or dicts" in janus.explain(jitted)


def test_long_lists_of_numbers_that_differ_between_branches_still_convert():
    def returned(x):
        if tf.reduce_sum(x) > 0:
            return x, [1] * 70
        return -x, [2] * 70

    def assigned(x):
        if tf.reduce_sum(x) > 0:
            values = [1] * 65
        else:
            values = [1] * 64 + [2]
        return x, values[-1], sum(values)

    calls = [(x,) for x in (POS[0], NEG[0], POS[1], NEG[1], POS[2], NEG[0], POS[3])]
    for fn in (returned, assigned):
        run_differential(plain(fn), calls, min_graph_calls=3)


def test_a_long_list_both_branches_leave_is_not_a_cond_output_per_item():
    def f(x):
        table = [0.5] * 2000
        if tf.reduce_sum(x) > 0:
            ids, y = table, x + 1.0
        else:
            ids, y = table, x - 1.0
        return y * len(ids), ids is table

    calls = [(x,) for x in (POS[0], NEG[0], POS[1], NEG[1], POS[2], NEG[0], POS[3])]
    jitted = run_differential(plain(f), calls, min_graph_calls=3)
    ops = jitted.cache.entries[0].graph.concrete.graph.get_operations()
    assert max(len(op.outputs) for op in ops if op.type in ("If", "StatelessIf")) < 10


def test_a_list_of_numbers_kept_by_both_branches_in_a_loop_is_no_cond_output():
    def f(x):
        table = [0.5] * 12
        for i in range(8):
            if tf.reduce_sum(x) > float(i) * 0.01:
                kept, x = table, x * 0.99
            else:
                kept, x = table, x * 1.01
        return x, kept is table

    calls = [(x,) for x in (POS[0], NEG[0], POS[1], NEG[1], POS[2], NEG[0], POS[3])]
    jitted = run_differential(plain(f), calls, min_graph_calls=3)
    ops = jitted.cache.entries[0].graph.concrete.graph.get_operations()
    assert max(len(op.outputs) for op in ops if op.type in ("If", "StatelessIf")) < 5


def test_conditional_expressions_and_boolean_operators_on_tensors():
    def f(x, y):
        big = tf.reduce_sum(x) > 3.0
        small = tf.reduce_sum(y) < 1.0
        z = x if big else y
        both = big and small
        either = big or small
        negated = not big
        return z, both, either, negated, (x if negated else y * 2.0)

    calls = [(a, b) for a in POS + NEG for b in NEG + POS[:2]]
    run_differential(plain(f), calls, min_graph_calls=10)


# ---------------------------------------------------------------- loops
def test_while_on_tensor_with_fixed_trip_count_is_unrolled():
    def f(x):
        i = tf.constant(0)
        while i < 3:
            x = x * 1.5
            i += 1
        return x, i

    jitted = run_differential(plain(f), [(x,) for x in POS * 2], min_graph_calls=5)
    assert not graph_kinds(jitted)["while"]


def test_while_with_varying_trip_count_becomes_while_loop():
    def f(x, n):
        i = tf.constant(0)
        total = tf.zeros_like(x)
        while i < n:
            total = total + x * tf.cast(i, tf.float32)
            i += 1
        return total, i

    calls = [(POS[k % 4], tf.constant(k % 5)) for k in range(12)]
    jitted = run_differential(plain(f), calls, min_graph_calls=6)
    assert graph_kinds(jitted)["while"]


def test_for_over_range_of_a_tensor_fixed_then_varying():
    def f(x, n):
        acc = x
        for i in range(n):
            acc = acc * 0.5 + i
        return acc

    fixed = [(POS[0], tf.constant(4))] * 5
    varying = [(POS[1], tf.constant(k)) for k in (2, 6, 0, 3, 9)]
    jitted = run_differential(plain(f), fixed + varying + varying, min_graph_calls=6)
    assert graph_kinds(jitted)["while"]


def test_for_over_tensor_rows_with_relaxed_batch_dimension():
    def f(x):
        acc = tf.zeros([3])
        for row in x:
            acc = acc + tf.tanh(row)
        return acc

    rng = np.random.default_rng(0)
    calls = [(tf.constant(rng.normal(size=(n, 3)).astype("float32")),) for n in (4, 4, 4, 4, 2, 7, 5, 3)]
    jitted = run_differential(plain(f), calls, min_graph_calls=4)
    assert jitted.cache.entries[0].graph.specs[0].shape == (None, 3)
    assert graph_kinds(jitted)["while"]


def test_python_loops_lists_tuples_enumerate_zip_break_continue():
    def f(xs, ws):
        acc = 0.0
        for i, (x, w) in enumerate(zip(xs, ws)):
            if i == 1:
                continue
            acc = acc + x * w
            if i >= 3:
                break
        else:
            acc = acc - 1.0
        for k in (1, 2):
            acc = acc * k
        return acc

    xs = [vec(1.0, 2.0), vec(2.0, 3.0), vec(0.0, 1.0), vec(5.0, 5.0), vec(1.0, 1.0)]
    calls = [(xs, [1.0, 2.0, 3.0, 4.0, 5.0]), (xs[:3], [1.0, 1.0, 1.0])] * 4
    run_differential(plain(f), calls, min_graph_calls=4)


def test_branch_outcome_sequence_is_speculated_per_unrolled_iteration():
    """The `if` breaks at the same iteration in every profiled call: each unrolled copy is speculated."""

    def f(x):
        for _ in range(10):
            if tf.reduce_max(x) > 20.0:
                break
            x = x * 2.0
        return x

    calls = [(POS[0],), (POS[3],), (POS[0] + 0.5,)] * 3 + [(POS[0] * 50.0,), (POS[0],)]
    jitted = run_differential(plain(f), calls, min_graph_calls=6)
    assert janus.stats(jitted)["assumption_failures"] == 1
    assert "break" in janus.explain(jitted)  # once the sequence changes, break under tf.cond is imperative


def test_list_appended_in_converted_loop_becomes_tensor_array():
    def f(xs):
        outputs = []
        h = tf.zeros([2])
        for x in xs:
            h = tf.tanh(h + x)
            outputs.append(h)
        return tf.stack(outputs), outputs[-1] if False else h

    rng = np.random.default_rng(1)
    calls = [(tf.constant(rng.normal(size=(n, 2)).astype("float32")),) for n in (3, 3, 3, 3, 5, 2, 6)]
    jitted = run_differential(plain(f), calls, min_graph_calls=3)
    assert graph_kinds(jitted)["while"]


def test_max_unroll_limit_uses_a_loop_op():
    janus.config.max_unroll = 4

    def f(x):
        for row in x:
            x = x + row
        return x

    jitted = run_differential(plain(f), [(tf.ones([6, 2]),)] * 5, min_graph_calls=2)
    assert graph_kinds(jitted)["while"]


@pytest.mark.parametrize("unroll,speculate", [(False, False), (True, True)])
def test_ablation_switches(unroll, speculate):
    janus.config.unroll_loops = unroll
    janus.config.speculate_branches = speculate

    def f(x):
        i = tf.constant(0)
        while i < 3:
            if tf.reduce_sum(x) > 0:
                x = x * 2.0
            i += 1
        return x

    jitted = run_differential(plain(f), [(x,) for x in POS * 2], min_graph_calls=4)
    kinds = graph_kinds(jitted)
    assert kinds["while"] == (not unroll)
    if not unroll:
        library = jitted.cache.entries[0].graph.concrete.graph.as_graph_def().library.function
        nested_ops = {node.op for fn in library for node in fn.node_def}
        assert bool(nested_ops & {"If", "StatelessIf"}) == (not speculate)


def test_break_inside_converted_loop_runs_imperatively_with_reason():
    def f(x, n):
        i = tf.constant(0)
        while i < n:
            i += 1
            if tf.reduce_sum(x) > 100.0:
                break
        return i

    calls = [(POS[0], tf.constant(k)) for k in (1, 2, 3, 4, 5)]
    jitted = run_differential(plain(f), calls, min_graph_calls=0)
    assert "break" in janus.explain(jitted)


# ---------------------------------------------------------------- gradients
def grads_of(fn):
    def wrapped(x, n):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(fn(x, n))
        return y, tape.gradient(y, x)

    return wrapped


def cond_body(x, n):
    if tf.reduce_sum(x) > 0:
        return x * x
    return tf.sin(x)


def while_body(x, n):
    i = tf.constant(0)
    while i < n:
        x = tf.tanh(x) * 1.5
        i += 1
    return x


def for_body(x, n):
    acc = tf.zeros_like(x)
    for i in range(n):
        acc = acc + x * tf.cast(i, tf.float32) + tf.sin(acc)
    return acc


@pytest.mark.parametrize("body", [cond_body, while_body, for_body])
def test_gradients_through_converted_control_flow_match_eager(body):
    calls = [(x, tf.constant(3)) for x in POS] + [(x, tf.constant(k)) for k, x in enumerate(NEG + POS)]
    run_differential(plain(grads_of(body)), calls, min_graph_calls=3)


def test_gradients_of_outer_tape_through_jitted_control_flow():
    jitted = janus.jit(while_body)
    for k in [2, 2, 2, 2, 3, 1, 4]:
        x = vec(0.3, -0.2)
        with tf.GradientTape() as t1:
            t1.watch(x)
            a = jitted(x, tf.constant(k))
        with tf.GradientTape() as t2:
            t2.watch(x)
            b = while_body(x, tf.constant(k))
        np.testing.assert_allclose(a, b, rtol=1e-5)
        np.testing.assert_allclose(t1.gradient(a, x), t2.gradient(b, x), rtol=1e-5)
    assert janus.stats(jitted)["graph_calls"] >= 3


def test_static_range_past_max_unroll_becomes_loop_with_python_accumulator():
    janus.config.max_unroll = 4

    def f(x):
        total = 0.0
        for t in range(x.shape[1]):
            total += tf.reduce_sum(x[:, t] * t)
        return total

    rng = np.random.default_rng(2)
    calls = [(tf.constant(rng.normal(size=(3, 9)).astype("float32")),) for _ in range(5)]
    jitted = run_differential(plain(f), calls, min_graph_calls=2)
    assert graph_kinds(jitted)["while"]


def test_unroll_switch_off_converts_static_range_and_falls_back_to_unrolling_when_needed():
    janus.config.unroll_loops = False

    def f(x, ws):
        for i in range(3):
            x = x * ws[i]  # ws[i] indexes a Python list: needs a static i, so this loop is unrolled
        return x

    jitted = run_differential(plain(f), [(POS[0], [1.0, 2.0, 3.0])] * 5, min_graph_calls=2)
    assert "unrolled instead of tf.while_loop: Python container indexed by a tensor" in janus.explain(jitted)


# ---------------------------------------------------------------- Python numbers carried by a loop op
def test_a_python_counter_in_a_loop_op_stays_a_python_number():
    def f(n, x):
        count = 0
        scale = 1.0
        for _ in tf.range(n):
            count += 1
            scale = scale * 0.5
            x = x + scale
        return count, scale, x

    calls = [(tf.constant(k), vec(1.0, 2.0)) for k in (3, 4, 0, 5, 2, 6, 1)]
    run_differential(plain(f), calls, min_graph_calls=3)


# ---------------------------------------------------------------- TF state when an assumption fails
def test_an_assumption_failing_in_a_later_iteration_puts_back_the_earlier_updates():
    def make():
        v = tf.Variable(0.0)

        def step(n, x):
            for i in tf.range(n):
                v.assign_add(1.0)
                if x[i] > 0:  # profiled: always; the last call fails it in the second iteration
                    v.assign_add(10.0)
            return v + 0.0

        return step, lambda: v

    calls = [(tf.constant(3 + k), tf.ones([10])) for k in range(6)]
    calls.append((tf.constant(3), tf.constant([1.0, -1.0, 1.0] + [1.0] * 7)))
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert janus.stats(jitted)["assumption_failures"] == 1


def test_an_assumption_on_a_variable_read_after_its_update():
    def make():
        v = tf.Variable(0.0)

        def step(x):
            v.assign_add(x)
            if v > 1000.0:  # speculated on a value that depends on the update
                return v * 2.0
            return v + 0.0

        return step, lambda: v

    run_differential(make, [(tf.constant(100.0 + k),) for k in range(12)], min_graph_calls=5)


def test_an_assumption_after_a_loop_op_that_updated_a_variable():
    def make():
        v = tf.Variable(0.0)

        def step(n):
            for _ in tf.range(n):
                v.assign_add(1.0)
            if v > 20.0:  # fails after the loop's updates ran
                return v * 2.0
            return v + 0.0

        return step, lambda: v

    run_differential(make, [(tf.constant(3 + k % 3),) for k in range(8)], min_graph_calls=3)
