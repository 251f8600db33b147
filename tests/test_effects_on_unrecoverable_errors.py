"""A call whose graph raises where it cannot be re-run eagerly still makes eager's Python effects.

janus makes a call's Python effects (attribute and list updates, deferred ``print``s) after its
graph succeeds. Most graph errors re-run the call eagerly, which makes them. Some cannot be re-run:
an op that may raise after a ``tf.print`` that could not wait for it (a user's assert, chained after
the print), or after an update of TF state that janus cannot put back (a hash table). Such an error
reached the user without the call's Python effects, where eager had made those before it raised.
Graphs with both are now refused with the reason; the same programs without Python effects keep
their graphs.
"""

import tensorflow as tf
from differential import run_differential

import janus

LABELS = [(tf.constant(i),) for i in (0, 1, 2, 1, 0, 2, 7, 1, 0, 2, 9, 1)]


class Trainer:
    """A step that counts in Python, logs its loss and checks its labels: a custom loop's shape."""

    def __init__(self):
        self.w = tf.Variable([0.5, -0.25, 1.0])
        self.steps = 0
        self.history: list = []

    def state(self):
        return self.w, self.steps, list(self.history)


def _refused_for_effects(jitted) -> None:
    explained = janus.explain(jitted)
    assert "would be lost if the op" in explained, explained


def test_a_python_counter_before_a_print_and_a_user_assert():
    def make():
        t = Trainer()

        def step(label):
            t.steps += 1
            t.w.assign_sub(0.1 * t.w)
            tf.print("w", t.w)
            tf.debugging.assert_less(label, 3, message="label out of range")
            loss = tf.reduce_sum(tf.gather(t.w, label) ** 2)
            t.history.append(loss)
            return loss

        return step, t.state

    jitted = run_differential(make, LABELS, min_graph_calls=0)
    _refused_for_effects(jitted)


def test_a_deferred_print_before_a_graph_print_and_a_check():
    def make():
        t = Trainer()

        def step(label):
            print("step", t.steps)
            t.steps += 1
            t.w.assign_add(tf.ones([3]))
            tf.print("w", t.w)
            tf.debugging.assert_non_negative(2 - label)
            return tf.gather(t.w, label)

        return step, t.state

    jitted = run_differential(make, LABELS, min_graph_calls=0)
    _refused_for_effects(jitted)


def test_a_hash_table_update_then_a_gather_that_raises():
    """A table's insert cannot be saved and put back: an error after it is not re-run."""

    def make():
        t = Trainer()
        table = tf.lookup.experimental.MutableHashTable(tf.int32, tf.float32, default_value=-1.0)

        def step(label):
            t.steps += 1
            table.insert(label, tf.cast(label, tf.float32) * 2.0)
            return tf.gather(t.w, label) + table.lookup(label)

        def state():
            keys, values = table.export()
            order = tf.argsort(keys)
            return (*t.state(), tf.gather(keys, order), tf.gather(values, order))

        return step, state

    run_differential(make, LABELS, min_graph_calls=0)


def test_without_python_effects_the_graph_serves():
    """The same step with its counters in TF: nothing to lose, so the graph stays."""

    def make():
        t = Trainer()
        steps = tf.Variable(0)

        def step(label):
            steps.assign_add(1)
            t.w.assign_sub(0.1 * t.w)
            tf.print("w", t.w)
            tf.debugging.assert_less(label, 3, message="label out of range")
            return tf.reduce_sum(tf.gather(t.w, label) ** 2)

        return step, lambda: (t.w, steps)

    jitted = run_differential(make, LABELS[:6], min_graph_calls=3)
    assert "would be lost" not in janus.explain(jitted)
