"""``tf.print``s that stay graph ops (a variable's value, inside a ``tf.cond`` branch or a loop) print
what eager prints, in eager's order, also on calls that raise part-way.

janus chains every op that prints (a print, or control flow that may run one) after the one before
it in the program. A print that no op which may raise depends on waits for those ops, so their
errors re-run the call eagerly, which prints once. Where a print cannot wait, an op that may raise
after it waits for every update and print before it, so its error leaves eager's state and text
and is not re-run. Each test compares the process's stderr (where a graph print writes) call by call.
"""

import pytest
import tensorflow as tf
from differential import assert_same_call, fd_lines, outcome, run_differential_fd

import janus

PREFIXES = ("A ", "B ", "k ", "pos ")  # the lines under test


def _differential_stderr(make, calls, capfd, min_graph_calls: int) -> janus.JitFunction:
    return run_differential_fd(make, calls, capfd, prefixes=PREFIXES, min_graph_calls=min_graph_calls)


class Counters:
    def __init__(self):
        self.v = tf.Variable(0.0)
        self.w = tf.Variable(1.0)
        self.table = tf.Variable([1.0, 2.0, 3.0])


def _make(body):
    def make():
        c = Counters()
        return (lambda *args: body(c, *args)), lambda: (c.v, c.w, c.table)

    return make


ONE = [(tf.constant(i),) for i in (0, 1, 0, 1, 2, 1, 5, 1, 0, 9, 2)]
TWO = [(tf.constant(i), tf.constant(n)) for i, n in ((0, 2), (1, 3), (0, 2), (1, 3), (0, 3), (2, 3), (1, 2), (0, 3))]


def test_a_branch_that_prints_a_variable_after_a_print_above_it(capfd):
    def body(c, i):
        c.v.assign_add(1.0)
        tf.print("A", c.v)
        if i > 0:
            tf.print("B", c.w)
            x = tf.gather(c.table, i)
        else:
            x = tf.constant(0.0)
        return x

    _differential_stderr(_make(body), ONE, capfd, min_graph_calls=3)


def test_a_print_in_a_branch_then_a_gather_that_raises(capfd):
    """The branch waits for the gather: its error re-runs the call before the branch printed."""

    def body(c, i):
        if i > 0:
            tf.print("pos", i)
        return tf.gather(c.table, i)

    _differential_stderr(_make(body), ONE, capfd, min_graph_calls=3)


def test_an_update_between_a_print_and_an_assert_that_fails(capfd):
    def body(c, i):
        c.v.assign_add(1.0)
        tf.print("A", c.v)
        c.w.assign_add(10.0)
        tf.debugging.assert_less(i, 3)
        return tf.gather(c.table, i)

    _differential_stderr(_make(body), ONE, capfd, min_graph_calls=3)


def test_a_print_in_a_loop_whose_later_turn_raises(capfd):
    """The loop's error comes after its earlier turns printed: not re-run (that printed them again),
    with its body in program order, so its text and TF state are eager's; the graph keeps serving."""

    def body(c, i, n):
        s = tf.constant(0.0)
        for k in tf.range(n):
            c.v.assign_add(1.0)
            tf.print("k", k, c.v)
            s += tf.gather(c.table, k * i)
        return s

    jitted = _differential_stderr(_make(body), TWO, capfd, min_graph_calls=3)
    assert janus.stats(jitted)["graph_calls"] >= 4 and "imperatively" not in janus.explain(jitted)


def test_updates_in_a_loop_whose_later_turn_raises_are_made_once(capfd):
    """No print: the loop's earlier turns' updates are put back before the call re-runs eagerly."""

    def body(c, i, n):
        s = tf.constant(0.0)
        for k in tf.range(n):
            c.v.assign_add(1.0)
            s += tf.gather(c.table, k * i)
        return s

    jitted = _differential_stderr(_make(body), TWO, capfd, min_graph_calls=3)
    assert janus.stats(jitted)["graph_calls"] >= 4  # recoverable: graphs serve the calls after the errors


def test_a_print_of_a_variable_then_an_if_never_taken_while_profiling(capfd):
    """The print waits for the branch's assertion. TF chained the assertion after the print (both
    stateful, no resource): the graph had a cycle and its first call failed; then it was refused
    ("an assumption depends on the state update PrintV2"). janus's checks are now left out of TF's
    chain, so the graph serves."""

    def body(c, i):
        tf.print("A", c.v)
        c.v.assign_add(1.0)
        if i > 100:
            c.w.assign_add(1.0)
        return tf.gather(c.table, i % 3)

    _differential_stderr(_make(body), ONE + [(tf.constant(101),), (tf.constant(1),)], capfd, 3)


def test_a_branch_that_prints_then_an_if_never_taken_while_profiling(capfd):
    """The branch waits for the speculation's assertion (TF chained the assertion after it)."""

    def body(c, i):
        x = tf.cast(i, tf.float32)
        if x > 1.0:
            tf.print("B", x)
        if x > 100.0:
            x = x * 2.0
        return x + 1.0

    jitted = _differential_stderr(_make(body), ONE + [(tf.constant(101),), (tf.constant(1),)], capfd, 3)
    assert "cycle" not in janus.explain(jitted)


# Shapes from training steps: a debug print of suspicious inputs, a periodic log in a branch, a
# branch that counts and prints, a branch whose result feeds the op that raises.
IDS = [(tf.constant(ids),) for ids in ([0, 1], [2, 0], [1, 1], [0, 2], [2, 2], [5, 0], [1, 2], [0, 0], [2, 9], [1, 0])]


def test_a_debug_print_of_the_inputs_then_a_lookup_that_raises(capfd):
    def body(c, ids):
        if tf.reduce_any(ids > 1):
            tf.print("B big ids:", ids)
        c.v.assign_add(1.0)
        return tf.reduce_sum(tf.gather(c.table, ids))

    _differential_stderr(_make(body), IDS, capfd, min_graph_calls=3)


def test_a_branch_that_counts_and_prints_then_a_gather_that_raises(capfd):
    def body(c, i):
        if i > 0:
            c.w.assign_add(1.0)
            tf.print("B", c.w)
        return tf.gather(c.table, i)

    _differential_stderr(_make(body), ONE, capfd, min_graph_calls=3)


def test_a_periodic_log_then_a_loss_branch_never_taken_while_profiling(capfd):
    """The log branch waits for the assertion of the later speculation: when that fails, the call
    is re-run before the branch printed."""

    def body(c, i):
        x = tf.cast(i, tf.float32)
        c.v.assign_add(1.0)
        if tf.equal(tf.math.floormod(c.v, 2.0), 0.0):
            tf.print("A step", x)
        loss = tf.gather(c.table, i % 3) * x
        if loss > 20.0:
            loss = loss / 2.0
        return loss

    calls = [(tf.constant(i),) for i in (0, 1, 2, 1, 0, 2, 1, 11, 2, 1, 20, 0, 1)]
    _differential_stderr(_make(body), calls, capfd, min_graph_calls=3)


def test_a_branch_whose_result_feeds_a_gather_that_raises(capfd):
    """The branch cannot wait for the gather, which reads its result: the gather waits for the
    branch, and its error reaches the user without a re-run (the text is printed once)."""

    def body(c, i):
        if i > 0:
            tf.print("pos", i)
            j = i + 1
        else:
            j = i
        return tf.gather(c.table, j)

    calls = [(tf.constant(i),) for i in (0, 1, 0, 1, 0, 1, 0, 2, 1, 0, 2, 1)]
    jitted = _differential_stderr(_make(body), calls, capfd, min_graph_calls=3)
    assert janus.stats(jitted)["graph_calls"] >= 6 and "imperatively" not in janus.explain(jitted)


class Scale:
    def __init__(self, value):
        self.value = value


def test_an_object_attribute_whose_type_changes_after_a_print(capfd):
    """Reading an attribute of an object passed in checks its type while the graph runs: the print
    (and the update) before it waits for that check, so the failed assumption re-runs the call
    before anything printed."""

    def body(c, scale):
        c.v.assign_add(1.0)
        tf.print("A", c.v)
        return c.v.read_value() * scale.value

    calls = [(Scale(s),) for s in (1.5, 2.5, 0.5, 1.0, 2.0, 3.0, 4, 1.0, 2.5)]
    _differential_stderr(_make(body), calls, capfd, min_graph_calls=3)


def test_an_update_then_a_printing_loop_with_an_unseen_branch_then_a_gather(capfd):
    """The loop holds a speculation's assertion and prints: no update may be delayed past the
    gather, which waits for the updates before it (that was a cycle, and the call was lost)."""

    def body(c, n, i):
        c.v.assign_add(1.0)
        for k in tf.range(n):
            tf.print("k", k)
            if k > 5:
                c.w.assign_add(2.0)
            else:
                c.w.assign_add(1.0)
        return tf.gather(c.table, i)

    calls = [(tf.constant(n), tf.constant(i)) for n, i in ((2, 0), (3, 1), (3, 0), (2, 1), (3, 2), (2, 4), (3, 1))]
    _differential_stderr(_make(body), calls, capfd, min_graph_calls=3)


def test_a_printing_loop_whose_later_turn_fails_a_speculation(capfd):
    """Turn 6 took the branch never seen while profiling: the call re-ran in eager and printed the
    earlier turns' text twice. The loop is built again without that speculation (a tf.cond)."""

    def body(c, n):
        for k in tf.range(n):
            tf.print("k", k)
            if k > 5:
                c.w.assign_add(2.0)
            else:
                c.w.assign_add(1.0)
        return c.w.read_value()

    calls = [(tf.constant(n),) for n in (2, 3, 3, 2, 3, 8, 2)]
    _differential_stderr(_make(body), calls, capfd, min_graph_calls=3)


def test_a_sparse_scatter_whose_rows_are_saved_then_a_print(capfd):
    """The scatter's row save is made after the ordering: it waits for what the scatter waits for
    (made in program order, it came after the print and waited for the scatter: a cycle at every call)."""

    def body(c, i):
        c.table.scatter_update(tf.IndexedSlices(tf.reshape(tf.cast(i, tf.float32), [1]), tf.reshape(i, [1])))
        c.v.assign_add(1.0)
        tf.print("A", c.v)
        if i > 1:
            tf.print("B", c.table)
        return c.table.read_value()

    _differential_stderr(_make(body), ONE, capfd, min_graph_calls=3)


def test_a_saved_scatter_then_a_print_then_an_assert_then_an_early_error(capfd):
    """The assert's error is not re-run: the scatter's saved rows are forgotten, where a later
    call's error (re-run) put them back into the variable."""

    def body(c, x, i):
        j = tf.gather(tf.constant([0, 1, 2]), i)
        c.table.scatter_update(tf.IndexedSlices(tf.reshape(x, [1]), tf.reshape(j, [1])))
        tf.print("A", c.table)
        tf.debugging.assert_less(x, 2.5)
        return c.table.read_value()

    calls = [
        (tf.constant(x), tf.constant(i))
        for x, i in ((1.0, 0), (2.0, 1), (1.0, 2), (1.5, 1), (5.0, 2), (7.0, 9), (1.0, 0))
    ]
    _differential_stderr(_make(body), calls, capfd, min_graph_calls=2)


def test_a_print_then_a_scatter_at_a_bad_index(capfd):
    """The scatter's error is not re-run (after the print): it applies the rows before the bad index,
    as eager's does; a row save before it raised in its place and applied none."""

    def body(c, x, ids):
        tf.print("A", c.table)
        c.table.scatter_add(tf.IndexedSlices(tf.fill(tf.shape(ids), x), ids))
        tf.debugging.assert_less(x, 2.5)
        return c.table.read_value()

    pairs = ((1.0, [0, 1]), (2.0, [1, 2]), (1.0, [2, 0]), (1.5, [0, 2]), (2.0, [1, 9]), (1.0, [0, 2]))
    _differential_stderr(_make(body), [(tf.constant(x), tf.constant(ids)) for x, ids in pairs], capfd, 2)


# A Python `while` over a tensor bound with a Python-int counter: `i += 1` carries an overflow
# check (a JanusAssert) in the loop, so the loop is ordered before every print and update like an
# assertion. Its scatter raising in the last turn must still leave the print and update above it
# made, as eager made them first: the call re-runs eagerly (the loop's earlier rows put back).
WHILE_CALLS = [
    (tf.constant(n), tf.constant(idx))
    for n, idx in ((2, [0, 1]), (2, [1, 2]), (3, [0, 1, 2]), (2, [0, 1]), (3, [2, 1, 0]), (2, [0, 7]), (2, [1, 2]))
]


@pytest.mark.parametrize("update", ["before", "none"])
def test_a_python_int_while_whose_last_turn_raises_after_a_print_and_an_update(update, capfd):
    def body(c, n, idx):
        tf.print("A", c.table)
        if update == "before":
            c.v.assign_add(1.0)
        i = 0
        while i < n:
            c.table.scatter_nd_add(tf.reshape(idx[i], [1, 1]), [10.0])
            i += 1
        return c.v + 0.0

    _differential_stderr(_make(body), WHILE_CALLS, capfd, min_graph_calls=3)


@pytest.mark.parametrize("above", ["update", "print"])
def test_a_python_int_while_that_prints_in_its_body_and_raises_in_a_later_turn(above, capfd):
    """The loop holds an assertion and prints: it waits for the update above it (which is saved and
    put back if the assertion fails), and its error after it printed leaves eager's state and text.
    A print above it is refused: the loop's assertion is checked after it, and janus cannot take it
    back (the loop came first, its text before the print's); the function runs imperatively."""

    def body(c, n, idx):
        if above == "update":
            c.v.assign_add(1.0)
        else:
            tf.print("A", c.v)
        i = 0
        while i < n:
            tf.print("k", idx[i])
            c.table.scatter_nd_add(tf.reshape(idx[i], [1, 1]), [10.0])
            i += 1
        return c.v + 0.0

    jitted = _differential_stderr(_make(body), WHILE_CALLS, capfd, min_graph_calls=3 if above == "update" else 0)
    if above == "print":
        assert janus.stats(jitted)["graph_calls"] == 0
        assert "an assumption is checked after the PrintV2" in janus.explain(jitted)


def test_an_update_then_a_printing_loop_with_an_unseen_branch_whose_later_turn_raises(capfd):
    """As above with ``tf.range``: the loop holds the unseen branch's assertion; its scatter's error
    in a later turn kept the update above the loop unmade (it waited for the loop)."""

    def body(c, n, idx):
        c.v.assign_add(1.0)
        for k in tf.range(n):
            tf.print("k", k)
            if k > 5:
                c.table.scatter_nd_add([[0]], [2.0])
            else:
                c.table.scatter_nd_add(tf.reshape(idx[k], [1, 1]), [1.0])
        return c.v + 0.0

    _differential_stderr(_make(body), WHILE_CALLS, capfd, min_graph_calls=3)


def test_a_print_of_a_keras_variable_or_of_a_list_of_variables_shows_its_value_then(capfd):
    """A Keras 3 variable wraps a ``tf.Variable`` without being one: the print was deferred, and its
    text showed the value after the update below it (``tf.print(opt.iterations)`` before
    ``apply_gradients``). Now it stays a graph op, as a ``tf.Variable``'s print does."""
    import keras

    def make():
        k = keras.Variable(0.0)
        c = Counters()
        opt = tf.keras.optimizers.SGD(0.1)

        def step(n):
            tf.print("A", k)
            tf.print("B", [c.v, c.table])
            tf.print("k", opt.iterations)
            k.assign_add(tf.cast(n, tf.float32))
            c.v.assign_add(1.0)
            opt.apply_gradients([(tf.constant([1.0, 1.0, 1.0]), c.table)])
            return k + 0.0

        return step, lambda: (k.value, c.v, c.table, opt.iterations)

    _differential_stderr(make, [(tf.constant(n),) for n in (1, 2, 3, 1, 2, 3, 1)], capfd, min_graph_calls=3)


def test_a_print_janus_would_defer_then_a_print_of_a_variable_keep_their_order(capfd):
    """``tf.print`` of a tensor is made after the graph ran, in program order with ``print`` and
    logging; where a print the graph makes (a variable's value, a branch) comes after it, its text
    came out first. Such a function is built again with its ``tf.print``s in the graph."""

    def body(c, i):
        tf.print("A", i)
        c.v.assign_add(1.0)
        tf.print("B", c.v)
        if i > 0:
            tf.print("k", i * 2)
        return c.v + 0.0

    jitted = _differential_stderr(_make(body), ONE, capfd, min_graph_calls=3)
    assert "building again with every tf.print in the graph" in janus.explain(jitted)


def test_a_python_print_to_stderr_between_tf_prints_before_a_graph_print_is_refused(capfd):
    """A ``print`` or logging call is made after the graph ran; where the graph prints to the same
    stream after it (here once its ``tf.print``s are graph ops), its text would come out second."""
    import sys

    def body(c, i):
        c.v.assign_add(1.0)
        tf.print("A", i)
        print("pos", file=sys.stderr)
        tf.print("B", c.v)
        return c.v + 0.0

    jitted = _differential_stderr(_make(body), ONE, capfd, min_graph_calls=0)
    assert "comes before a tf.print the graph makes" in janus.explain(jitted)


def test_a_print_of_a_list_attribute_of_variables_in_a_dict_shows_its_values_then(capfd):
    class Holder(Counters):
        def __init__(self):
            super().__init__()
            self.pair = [self.v, self.w]

    def make():
        c = Holder()

        def step(i):
            tf.print("A", {"vars": c.pair, "i": i})
            c.v.assign_add(tf.cast(i, tf.float32))
            return c.v + 0.0

        return step, lambda: (c.v, c.w)

    _differential_stderr(make, ONE, capfd, min_graph_calls=3)


def test_a_tf_print_to_a_stream_it_refuses_raises_before_the_update_below_it(capfd):
    """Eager's ``tf.print`` raises ValueError on ``output_stream="stderr"`` (a name, not a stream): it
    was deferred, raised after the graph had updated the variable; now it stays a graph op, whose
    build fails, and the function runs as eager."""

    def body(c, i):
        tf.print("A", i, output_stream="stderr")
        c.v.assign_add(1.0)
        return c.v + 0.0

    _differential_stderr(_make(body), ONE, capfd, min_graph_calls=0)


def test_structures_holding_variables_are_printed_as_eager_prints_them(capfd):
    """A namedtuple holding a list attribute of variables, an OrderedDict attribute of variables and
    a Mapping that is not a dict: each printed the variables' later values, or the list's repr, or
    lost its own type's text."""
    import collections

    Pair = collections.namedtuple("Pair", "a b")

    class Frozen(collections.abc.Mapping):
        __supported_by_tf_nest__ = True  # no warning from TF, which warns only the first two times in a process

        def __init__(self, items):
            self._d = dict(items)

        def __getitem__(self, key):
            return self._d[key]

        def __iter__(self):
            return iter(self._d)

        def __len__(self):
            return len(self._d)

        def __repr__(self):
            return f"Frozen({self._d!r})"

    class Holder(Counters):
        def __init__(self):
            super().__init__()
            self.pair = [self.v, self.w]
            self.ordered = collections.OrderedDict([("w", self.w), ("v", self.v)])
            self.frozen = Frozen({"v": self.v})

    def make():
        c = Holder()

        def step(i):
            tf.print("A", Pair(c.pair, i))
            tf.print("B", c.ordered)
            tf.print("k", c.frozen)
            c.v.assign_add(tf.cast(i, tf.float32))
            return c.v + 0.0

        return step, lambda: (c.v, c.w)

    _differential_stderr(make, ONE, capfd, min_graph_calls=0)


def test_a_log_call_above_a_graph_print_counts_whatever_its_logger_is_set_to_now(capfd):
    """A logger off while the graph is built may be switched on later: its call counts on both
    streams (the graph took it for one that writes nothing, and printed first once it did)."""
    import logging
    import sys

    logger = logging.getLogger("janus_test_later_logger")
    handler = logging.StreamHandler(sys.stderr)
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False

    def body(c, i):
        logger.info("pos %d", 1)
        c.v.assign_add(1.0)
        tf.print("B", c.v)
        return c.v + 0.0

    try:
        eager_fn, eager_state = _make(body)()
        raw_fn, jit_state = _make(body)()
        jitted = janus.jit(raw_fn)
        capfd.readouterr()
        for n, args in enumerate(ONE):
            if n == 5:
                logger.setLevel(logging.INFO)
            expected = outcome(eager_fn, args)
            eager_text = fd_lines(capfd, PREFIXES)
            actual = outcome(jitted, args)
            assert fd_lines(capfd, PREFIXES) == eager_text, f"call {n}"
            assert_same_call(n, expected, actual, eager_state, jit_state)
        assert "a call of logging made after the graph ran" in janus.explain(jitted)
    finally:
        logger.removeHandler(handler)


def test_a_log_call_above_a_branch_that_prints_keeps_its_place(capfd):
    """The print-order refusal let the log statement run after the graph (``later``), whose own
    check saw only top-level prints: the branch's text came out before the log line."""
    import logging
    import sys

    logger = logging.getLogger("janus_test_branch_logger")
    handler = logging.StreamHandler(sys.stderr)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False

    def make():
        c = Counters()

        def step(i):
            logger.info("pos %d", 1)
            c.v.assign_add(1.0)
            if c.v % 2.0 == 0.0:
                tf.print("B", c.v)
            return tf.gather(c.table, i)

        return step, lambda: (c.v, c.table)

    try:
        jitted = _differential_stderr(make, ONE, capfd, min_graph_calls=0)
        assert "a call of logging made after the graph ran" in janus.explain(jitted)
    finally:
        logger.removeHandler(handler)


def test_a_user_mapping_in_a_print_is_not_looked_into_while_generating(capfd):
    """Listing a user ``Mapping``'s values runs its code: janus must not run it while it builds a
    graph (eager runs it at every call). Such a print is taken to hold a variable: not deferred,
    and a graph op that would run user code is refused."""
    import collections.abc

    def make():
        c = Counters()
        reads = []

        class Counting(collections.abc.Mapping):
            __supported_by_tf_nest__ = True  # no warning from TF, which warns only the first two times

            def __getitem__(self, key):
                reads.append(key)
                return 1

            def __iter__(self):
                return iter(["n"])

            def __len__(self):
                return 1

            def __repr__(self):
                return "Counting(1)"

        mapping = Counting()

        def step(i):
            tf.print("A", mapping)
            c.v.assign_add(tf.cast(i, tf.float32))
            return c.v + 0.0

        return step, lambda: (c.v, len(reads))

    jitted = _differential_stderr(make, ONE, capfd, min_graph_calls=0)
    assert "its text comes from code janus does not look into" in janus.explain(jitted)
