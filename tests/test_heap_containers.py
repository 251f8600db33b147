"""[generalize] Methods of lists and dicts that live on the heap: logged and replayed after the graph."""

import tensorflow as tf
from differential import assert_same, run_differential

import janus


def test_a_bounded_history_with_pop_and_insert():
    def make():
        history = [tf.constant(0.0)]

        def step(x):
            history.insert(0, x)
            if len(history) > 3:
                history.pop()
            return tf.add_n(history)

        return step, lambda: list(history)

    run_differential(make, [(tf.constant(float(i)),) for i in range(8)], min_graph_calls=3)


def test_dict_setdefault_pop_del_and_clear():
    def make():
        logs = {"seen": 0}
        buffers = {"stale": tf.constant(-1.0)}

        def step(x):
            logs.setdefault("first", x)
            logs["seen"] = logs["seen"] + 1
            buffers["a"] = x * 2.0
            if "stale" in buffers:
                del buffers["stale"]
            last = logs.pop("last", None)
            logs["last"] = x
            return x if last is None else x + last

        return step, lambda: (dict(logs), dict(buffers))

    run_differential(make, [(tf.constant(float(i)),) for i in range(9)], min_graph_calls=3)


def test_clearing_a_list_argument():
    def step(x, items):
        total = x + tf.add_n(items)
        items.clear()
        items.append(total)
        return total

    jitted = janus.jit(step)
    for i in range(8):
        eager_items, janus_items = ([tf.constant(1.0), tf.constant(float(i))] for _ in range(2))
        assert_same(step(tf.constant(0.5), eager_items), jitted(tf.constant(0.5), janus_items))
        assert_same(eager_items, janus_items)
    assert janus.stats(jitted)["graph_calls"] >= 4, janus.explain(jitted)
