"""[generalize] Finding a lambda's source: inside a dict or list literal that spans lines (the
lines do not parse on their own: the whole file is parsed), several alike on one line (the columns
its code comes from tell them apart), a lambda split over lines. A lambda without source (made by
``eval``) runs eagerly.
"""

import tensorflow as tf
from differential import run_differential

import janus


def vec(*values):
    return tf.constant([float(v) for v in values])


def test_lambdas_alike_on_one_line_picked_by_index():
    def make():
        fns = [lambda t: t * 2.0, lambda t: t + 1.0, lambda t: t]  # fmt: skip

        def step(x):
            return fns[0](x) - fns[1](x) * fns[2](x)

        return step, lambda: None

    run_differential(make, [(vec(1.0, i),) for i in range(8)], min_graph_calls=3)


def test_a_lambda_split_over_lines_inside_parentheses():
    def make():
        # fmt: off
        act = (  # noqa: E731 - the user's shape
            lambda t:
            tf.tanh(t) * 2.0
        )
        blend = {
            "a": lambda t, s=0.5: (
                t * s + 1.0
            ),
        }
        # fmt: on

        def step(x):
            return act(x), blend["a"](x)

        return step, lambda: None

    run_differential(make, [(vec(1.0, i),) for i in range(8)], min_graph_calls=3)


def test_lambdas_in_a_multi_line_list_handed_to_tf_switch_case():
    def make():
        def step(x, k):
            branches = [
                lambda: x * 2.0,
                lambda: x - 1.0,
            ]
            return tf.switch_case(k, branches)

        return step, lambda: None

    run_differential(make, [(vec(1.0, i), tf.constant(i % 2)) for i in range(8)], min_graph_calls=3)


def test_a_lambda_made_by_eval_runs_eagerly():
    def make():
        double = eval("lambda t: t * 2.0")  # noqa: S307 - a function without source

        def step(x):
            return double(x)

        return step, lambda: None

    jitted = run_differential(make, [(vec(1.0, i),) for i in range(5)], min_graph_calls=0)
    assert "source unavailable" in janus.explain(jitted)


def test_a_lambda_with_positional_only_parameters_gets_a_graph():
    def make():
        scaled = lambda t, /: t * 4.0  # noqa: E731 - the shape under test

        return scaled, lambda: None

    run_differential(make, [(vec(1.0, i),) for i in range(6)], min_graph_calls=2)
