"""``tf.print`` keeps eager's order with ``print`` and logging: a ``tf.print`` statement outside
tensor control flow is made after the graph ran, in program order with the other deferred calls
(it printed before them from inside the graph), and is never made twice when a call re-runs
eagerly. Where it cannot be deferred (a variable's value, inside a tf.cond or loop) it stays a graph op."""

import sys

import tensorflow as tf
from differential import run_differential

import janus


def test_tf_print_between_python_prints_keeps_their_order():
    def make():
        def step(x):
            print("before", flush=True)
            tf.print("loss", tf.reduce_sum(x), output_stream=sys.stdout)
            print("after")
            return x * 2.0

        return step, lambda: None

    jitted = run_differential(make, [(tf.constant([1.0, float(n)]),) for n in range(6)], min_graph_calls=2)
    assert "tf.print() at" in janus.explain(jitted)


def test_tf_print_before_an_op_that_raises_prints_once():
    def make():
        log = []

        def lookup(table, i):
            log.append("call")
            tf.print("looking up", i, output_stream=sys.stdout)
            return tf.gather(table, i) * 2.0

        return lookup, lambda: list(log)

    table = tf.constant([1.0, 2.0, 3.0])
    calls = [(table, tf.constant(n % 3)) for n in range(5)] + [(table, tf.constant(7))] + [(table, tf.constant(1))] * 2
    run_differential(make, calls, min_graph_calls=2)


def test_tf_print_of_a_variable_and_inside_a_loop_stay_graph_ops():
    def make():
        v = tf.Variable(1.0)

        def step(n):
            v.assign_add(1.0)
            tf.print("v", v)  # to the process's stderr, which the comparison does not capture
            i = tf.constant(0)
            while i < n:
                tf.print("turn", i)
                i += 1
            return i

        return step, lambda: v

    jitted = run_differential(make, [(tf.constant(n % 3 + 1),) for n in range(6)], min_graph_calls=2)
    assert janus.stats(jitted)["split_calls"] == 0
