"""[generalize] Nested ``def``s and lambdas inside the jitted function: ``nonlocal`` variables, free
variables read when the call reads them (not when it starts), and writes eager would make only on
the path it takes (a branch, a loop iteration), which the graph must not make up.
"""

import tensorflow as tf
from differential import run_differential

import janus


def vec(*values):
    return tf.constant([float(v) for v in values])


def calls(n):
    return [(vec(i, 1.0 - i),) for i in range(n)]


def test_a_free_variable_read_after_another_nested_def_bumped_it():
    def make():
        def step(x):
            count = 0

            def bump():
                nonlocal count
                count += 1

            def scaled(t):
                bump()
                return t * count  # Python reads the variable now: after bump()

            return scaled(x) + scaled(x), count

        return step, lambda: None

    run_differential(make, calls(8), min_graph_calls=3)


def test_nonlocal_two_levels_up_and_a_variable_of_the_middle_function():
    def make():
        def step(x):
            total = 0.0

            def outer(t):
                seen = 0

                def inner(u):
                    nonlocal total, seen
                    seen += 1
                    total = total + 1.5
                    return u * 2.0

                y = inner(inner(t))
                return y + seen

            return outer(x), total

        return step, lambda: None

    run_differential(make, calls(8), min_graph_calls=3)


def test_a_lambda_reads_the_value_the_variable_has_when_it_is_called():
    def make():
        def step(x):
            k = 1.0
            f = lambda t: t * k  # noqa: E731 - the user's shape
            k = 3.0
            a = f(x)
            k = 5.0
            return a, f(x), [f(r) for r in tf.unstack(x)]

        return step, lambda: None

    run_differential(make, calls(8), min_graph_calls=3)


def test_a_comprehension_in_a_nested_def_reads_its_free_variables():
    def make():
        def step(x):
            w = [1.0, 2.0]

            def mix(t):
                return [t * v for v in w if v > 1.5] + [t * scale for scale in (3.0,)]

            return mix(x)

        return step, lambda: None

    run_differential(make, calls(8), min_graph_calls=3)


def test_a_nonlocal_write_under_a_tensor_if_falls_back_to_eager():
    """Eager bumps the counter only when the branch is taken; a tf.cond would trace both."""

    def make():
        def step(x):
            hits = 0

            def hit():
                nonlocal hits
                hits += 1

            if tf.reduce_sum(x) > 2.0:
                hit()
            return x + 1.0, hits

        return step, lambda: None

    args = [(vec(i % 3, 0.5),) for i in range(9)]  # both sides taken while profiling: a real tf.cond
    jitted = run_differential(make, args, min_graph_calls=0)
    assert "nonlocal hits" in janus.explain(jitted)


def test_a_nested_def_appending_to_an_enclosing_list_under_a_tensor_if_falls_back():
    def make():
        def step(x):
            acc = []

            def keep(t):
                if tf.reduce_sum(t) > 2.0:
                    acc.append(t)
                return t

            keep(x)
            return len(acc), x * 2.0

        return step, lambda: None

    args = [(vec(i % 3, 0.5),) for i in range(9)]
    jitted = run_differential(make, args, min_graph_calls=0)
    assert "mutated inside tensor-dependent control flow" in janus.explain(jitted)


def test_a_lambda_called_in_a_tf_cond_branch_reads_the_branch_s_value():
    """``y`` rebound in the branch: the lambda reads the branch's ``y`` (it once read the old one)."""

    def make():
        def step(x):
            y = x
            f = lambda: y * 2.0  # noqa: E731
            if tf.reduce_sum(x) > 2.0:
                y = x + 1.0
                z = f()
            else:
                z = f() - 1.0
            return z, f()

        return step, lambda: None

    run_differential(make, [(vec(i % 3, 0.5),) for i in range(9)], min_graph_calls=4)


def test_a_nested_def_called_in_a_while_loop_body_reads_the_carried_value():
    def make():
        def step(x, n):
            acc = x

            def grown():
                return acc * 1.5

            i = tf.constant(0)
            while i < n:
                acc = grown() + 1.0
                i += 1
            return acc

        return step, lambda: None

    run_differential(make, [(vec(i, 1.0), tf.constant(i % 4)) for i in range(9)], min_graph_calls=4)
