"""Key-based reads of a dict that janus copies from the heap or an argument (``batch.get("y")``,
``cfg.keys()``, ``"y" in batch``): its keys are guarded, so they are read from the copy, in the
graph, as ``batch["y"]`` already was. They made the whole function run split before."""

import pytest
import tensorflow as tf
from differential import run_differential

READS = ["get", "get_default", "contains", "keys", "items", "values", "len"]


def _batches():
    calls = []
    for i in range(8):
        batch = {"x": tf.constant([1.0, float(i)])}
        if i % 3 != 2:  # some batches carry no "y": the keys guard rebuilds
            batch["y"] = tf.constant([float(i) * 0.5])
        calls.append((batch,))
    return calls


@pytest.mark.parametrize("read", READS)
def test_a_batch_dict_argument(read):
    def make():
        w = tf.Variable(2.0)

        def step(batch):
            total = tf.reduce_sum(batch["x"] * w)
            if read == "get":
                y = batch.get("y")
                total += 0.0 if y is None else tf.reduce_sum(y)
            elif read == "get_default":
                total += tf.reduce_sum(batch.get("y", tf.constant([10.0])))
            elif read == "contains":
                total += 1.0 if "y" in batch else -1.0
            elif read == "keys":
                total += float(len(list(batch.keys())))
            elif read == "items":
                for key, value in batch.items():
                    total += tf.reduce_sum(value) if key == "y" else 0.0
            elif read == "values":
                for value in batch.values():
                    total += tf.reduce_sum(value)
            else:
                total += float(len(batch))
            w.assign_add(0.5)
            return total

        return step, lambda: w

    run_differential(make, _batches(), min_graph_calls=3)


def test_a_config_dict_attribute_changed_between_calls():
    class Trainer:
        def __init__(self):
            self.config = {"scale": 2.0}
            self.w = tf.Variable(1.0)

        def step(self, x):
            return x * self.w * self.config.get("scale", 1.0) + self.config.get("shift", 0.0)

    def make():
        trainer = Trainer()
        calls = []

        def state():
            calls.append(1)
            if len(calls) == 4:
                trainer.config["scale"] = 3.0
            if len(calls) == 6:
                trainer.config["shift"] = 1.0
            return dict(trainer.config)

        return trainer.step, state

    run_differential(make, [(tf.constant(float(i)),) for i in range(9)], min_graph_calls=3)


def test_a_keys_view_returned_shows_the_live_dict():
    """Eager returns a view of the caller's dict; a view of janus's copy would not see a key the
    caller adds afterwards."""
    import janus

    def step(batch):
        return tf.reduce_sum(batch["x"]), batch.keys()

    jitted = janus.jit(step)
    for i in range(6):
        batch = {"x": tf.constant([1.0, float(i)])}
        _, keys = jitted(batch)
        batch["z"] = 1
        assert sorted(keys) == ["x", "z"], f"call {i}"
