"""[generalize] A list, dict or set default argument of a function janus inlines lives on the
function from one call to the next: it is read from the heap (guarded, its changes logged and
replayed), never changed once while generating (that baked the generation's contents into the graph
and never changed it again: a wrong answer from the next call on).
"""

import tensorflow as tf
from differential import run_differential


def vec(*values):
    return tf.constant([float(v) for v in values])


def calls(n):
    return [(vec(i, 1.0),) for i in range(n)]


def test_a_list_default_appended_on_every_call():
    def make():
        def remember(x, seen=[]):  # noqa: B006 - the user's shape
            seen.append(1)
            return x * len(seen)

        def step(x):
            return remember(x)

        return step, lambda: remember.__defaults__[0]

    run_differential(make, calls(8), min_graph_calls=0)


def test_a_dict_default_counting_calls():
    def make():
        def bump(x, counts={"n": 0}):  # noqa: B006
            counts["n"] += 1
            return x * 2.0

        def step(x):
            return bump(x), bump(x + 1.0)

        return step, lambda: dict(bump.__defaults__[0])

    run_differential(make, calls(10), min_graph_calls=3)


def test_a_list_default_only_read():
    def make():
        def total(x, axes=[0]):  # noqa: B006
            return tf.reduce_sum(x, axis=axes)

        def step(x):
            return total(x) + total(x, [0])

        return step, lambda: None

    run_differential(make, calls(8), min_graph_calls=3)
