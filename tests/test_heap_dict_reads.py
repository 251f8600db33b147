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


@pytest.mark.parametrize("kind", ["returned", "stored"])
def test_a_heap_dict_returned_or_stored_is_the_caller_s_object(kind):
    """janus rebuilt its copy of a heap dict for the result (or the attribute it stored it in): the
    caller then changed the copy, not the dict eager hands back."""

    class Holder:
        pass

    def make():
        config = {"scale": 2.0, "n": 0}
        holder = Holder()

        def step(x):
            y = x * config.get("scale")
            if kind == "stored":
                holder.last = config
                return y
            return y, config

        def state():
            result = holder.last if kind == "stored" else config
            result["n"] += 1  # the caller changes what it got back
            return holder.__dict__.get("last", config) is config, dict(config)

        return step, state

    run_differential(make, [(tf.constant(float(i)),) for i in range(8)], min_graph_calls=3)


def test_an_argument_dict_stored_on_an_object_is_the_argument():
    class Holder:
        pass

    batches = [{"x": tf.constant([float(i)])} for i in range(8)]

    def make():
        holder = Holder()
        seen = []

        def step(batch):
            holder.last = batch
            return tf.reduce_sum(batch.get("x")) * 2.0

        def state():
            seen.append(holder.last)
            return all(a is b for a, b in zip(seen, batches))

        return step, state

    run_differential(make, [(b,) for b in batches], min_graph_calls=3)


@pytest.mark.parametrize("key", [1.0, True, "np_int64"])
def test_keys_equal_in_value_but_not_in_type_are_told_apart(key):
    """The keys guard compared keys with ``==``: ``1``, ``1.0``, ``True`` and ``np.int64(1)`` passed
    for one another, and the graph gave the first call's key back."""
    import numpy as np

    other = np.int64(1) if key == "np_int64" else key

    def make():
        def step(d):
            return [str(k) + type(k).__name__ for k in d.keys()], d[1] * 2.0  # noqa: SIM118 - the shape under test

        return step, lambda: None

    calls = [({1: tf.constant(float(i))},) for i in range(5)] + [({other: tf.constant(9.0)},)] * 3
    run_differential(make, calls, min_graph_calls=3)


def test_a_tuple_attribute_whose_items_change_type():
    class Config:
        def __init__(self):
            self.shape = (2, 3)

    def make():
        config = Config()
        calls = []

        def step(x):
            return x * 2.0, str(config.shape)

        def state():
            calls.append(1)
            if len(calls) == 5:
                config.shape = (2.0, 3)  # equal, as a tuple, to (2, 3)
            return config.shape

        return step, state

    run_differential(make, [(tf.constant(float(i)),) for i in range(8)], min_graph_calls=3)
