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
from differential import assert_same, outcome, run_differential

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


class Record:
    """A new object each call, as a step's result holder: janus sets its attributes at run time."""

    loss = None


def test_an_attribute_of_an_object_passed_in_set_before_a_print_and_an_assert():
    """The attribute is set through the call's store, not a logged write: it was lost too."""

    def step(w, rec, label):
        loss = tf.reduce_sum(w * tf.cast(label, tf.float32))
        rec.loss = loss
        w.assign_sub(0.1 * w)
        tf.print("w", w)
        tf.debugging.assert_less(label, 3)
        return loss

    jitted = janus.jit(step)
    runs = {fn: (tf.Variable([0.5, -0.25, 1.0]), []) for fn in (step, jitted)}
    for n, (label,) in enumerate(LABELS):
        outcomes = []
        for fn, (w, records) in runs.items():
            records.append(Record())
            outcomes.append(outcome(fn, (w, records[-1], label))[:2])
        assert outcomes[0][0] == outcomes[1][0], f"call {n}: {outcomes}"
        (w_eager, eager_records), (w_jit, jit_records) = runs.values()
        assert_same(w_eager, w_jit, f"call {n} w")
        assert_same([r.loss for r in eager_records], [r.loss for r in jit_records], f"call {n} records")
    _refused_for_effects(jitted)


def test_a_vocabulary_lookup_with_a_python_counter_keeps_its_graph():
    """A table's lookup only reads it: an error after it is re-run, so the counter is kept."""

    def make():
        t = Trainer()
        vocab = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant([10, 20, 30]), tf.constant([0, 1, 2])), default_value=9
        )

        def step(word):
            t.steps += 1
            index = vocab.lookup(word)
            t.w.assign_sub(0.1 * t.w)
            return tf.gather(t.w, index)

        return step, t.state

    words = [(tf.constant(w),) for w in (10, 20, 30, 20, 10, 30, 40, 20, 10, 30)]
    jitted = run_differential(make, words, min_graph_calls=5)
    assert "would be lost" not in janus.explain(jitted)


def test_python_effects_after_every_op_that_may_raise_keep_the_graph():
    """Eager makes no effect after the op that raised: those janus defers are not lost, so such a
    graph is not refused (a tf.print of constants after an assert was deferred, and refused)."""

    def make():
        t = Trainer()

        def step(label):
            tf.print("w", t.w)
            t.w.assign_sub(0.1 * t.w)
            tf.debugging.assert_less(label, 3, message="label out of range")
            tf.print("step done")
            loss = tf.reduce_sum(t.w)
            t.history.append(loss)
            t.steps += 1
            return loss

        return step, t.state

    jitted = run_differential(make, LABELS, min_graph_calls=5)
    assert "would be lost" not in janus.explain(jitted)
