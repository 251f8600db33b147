"""[state]: impure functions. Heap writes are logged, replayed after success, never half-applied."""

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same, run_differential

import janus


def vec(*values):
    return tf.constant(values, tf.float32)


class RNNModel:
    """The JANUS paper's Fig. 1: the hidden state lives on the object across calls."""

    def __init__(self):
        self.state = tf.zeros([2])
        self.w = tf.constant([0.5, -0.25])

    def __call__(self, sequence):
        state = self.state
        outputs = []
        for item in sequence:
            state = tf.tanh(state * self.w + item)
            outputs += [state]
        self.state = state
        return tf.reduce_sum(tf.stack(outputs))


def test_state_carried_on_self_across_calls():
    def make():
        model = RNNModel()

        def run(seq):
            return model(seq)

        return run, lambda: model.state

    seqs = [(tf.constant(np.full((3, 2), 0.1 * i, np.float32)),) for i in range(8)]
    run_differential(make, seqs, min_graph_calls=5)


def test_trace_based_tf_function_gets_state_on_self_wrong():
    """Documented failure of trace-based conversion: tf.function bakes the first state in."""

    class Grower:
        def __init__(self):
            self.state = 0

        def step(self):
            self.state += 2
            return self.state

    eager, traced, jitted_obj = Grower(), Grower(), Grower()
    traced_step = tf.function(traced.step)
    jitted_step = janus.jit(Grower.step)
    expected = [eager.step() for _ in range(6)]
    got_traced = [traced_step() for _ in range(6)]
    got_janus = [jitted_step(jitted_obj) for _ in range(6)]
    assert expected == [2, 4, 6, 8, 10, 12]
    assert got_traced == [2, 2, 2, 2, 2, 2]  # tf.function: silently wrong
    assert got_janus == expected and jitted_obj.state == 12
    assert janus.stats(jitted_step)["graph_calls"] >= 2


COUNT = 0


def test_global_and_nonlocal_counters():
    def make_global():
        def f(x):
            global COUNT
            COUNT += 1
            return x * COUNT

        return f, lambda: COUNT

    global COUNT
    calls = [(vec(1.0, 2.0),)] * 7
    COUNT = 0
    eager_f, _ = make_global()
    expected = [eager_f(*c) for c in calls]
    COUNT = 0
    jitted = janus.jit(make_global()[0])
    for e, c in zip(expected, calls):
        assert_same(e, jitted(*c))
    assert COUNT == 7 and janus.stats(jitted)["graph_calls"] >= 2

    def make_nonlocal():
        total = 0.0
        steps = 0

        def f(x):
            nonlocal total, steps
            steps += 1
            total = total + tf.reduce_sum(x)
            return total, steps

        return f, lambda: (total, steps)

    run_differential(make_nonlocal, calls, min_graph_calls=2)


class Cache:
    def __init__(self):
        self.data = {"sum": tf.zeros([2]), "n": 0}
        self.history = []


def test_dicts_held_on_objects_and_heap_lists_appended():
    def make():
        cache = Cache()

        def f(x):
            cache.data["sum"] = cache.data["sum"] + x
            cache.data["n"] += 1
            cache.history.append(tf.reduce_sum(x))
            return cache.data["sum"] / tf.cast(cache.data["n"], tf.float32)

        return f, lambda: (dict(cache.data), list(cache.history))

    jitted = run_differential(make, [(vec(1.0, float(i)),) for i in range(10)], min_graph_calls=5)
    # appending never guards the list's length; the int counter is relaxed to its type after 2 failures
    assert janus.stats(jitted)["graphs_built"] <= 3


def test_lists_passed_in_and_appended_to():
    def f(x, log):
        log.append(x * 2.0)
        log.extend([x, x + 1.0])
        return len(log)

    eager_log, janus_log = [], []
    jitted = janus.jit(f)
    for i in range(6):
        x = vec(float(i), 1.0)
        assert f(x, eager_log) == jitted(x, janus_log)
        eager_log.clear(), janus_log.clear()  # same length every call
    for _ in range(3):
        f(vec(1.0, 2.0), eager_log), jitted(vec(1.0, 2.0), janus_log)
    assert_same(eager_log, janus_log)
    assert janus.stats(jitted)["graph_calls"] >= 3


def test_prints_are_replayed_once_per_call_in_order(capsys):
    def f(x, tag):
        print("step", tag, "start")
        y = x * 2.0
        print("value", y, sep="|", end=";\n")
        return y

    for x in [vec(1.0, 2.0), vec(3.0, 4.0), vec(5.0, 6.0), vec(7.0, 8.0), vec(9.0, 1.0)]:
        f(x, "a")
    eager_out = capsys.readouterr().out
    jitted = janus.jit(f)
    for x in [vec(1.0, 2.0), vec(3.0, 4.0), vec(5.0, 6.0), vec(7.0, 8.0), vec(9.0, 1.0)]:
        jitted(x, "a")
    assert capsys.readouterr().out == eager_out
    assert janus.stats(jitted)["graph_calls"] == 2


class Account:
    def __init__(self):
        self.balance = tf.constant(10.0)
        self.ops = 0


def test_exception_raised_mid_function_on_some_calls():
    def make():
        acct = Account()

        def withdraw(amount):
            acct.ops += 1
            if amount > 5.0:
                raise ValueError("over the limit")  # after a heap write: eager keeps the write
            acct.balance = acct.balance - amount
            return acct.balance

        return withdraw, lambda: (acct.balance, acct.ops)

    calls = [(tf.constant(1.0),)] * 5 + [(tf.constant(20.0),), (tf.constant(1.0),)] + [(tf.constant(0.5),)] * 3
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert janus.stats(jitted)["assumption_failures"] >= 1


def test_all_or_nothing_when_an_assumption_fails_after_writes():
    """A heap write and a variable update precede an assumption that fails in the same call."""

    def make():
        v = tf.Variable(0.0)
        box = Account()

        def f(x, flag):
            box.ops += 1
            box.balance = box.balance + x
            v.assign_add(x)
            if tf.reduce_sum(flag) > 0:
                y = x * 2.0
            else:
                y = x - 1.0
            return y

        return f, lambda: (v.numpy(), box.balance, box.ops)

    on, off = tf.constant([1]), tf.constant([-1])
    calls = [(tf.constant(1.0), on)] * 5 + [(tf.constant(2.0), off)] + [(tf.constant(1.0), on)] * 2
    jitted = run_differential(make, calls, min_graph_calls=4)
    assert janus.stats(jitted)["assumption_failures"] == 1


def test_try_finally_and_unknown_context_managers():
    import contextlib

    def f(x, box):
        try:
            y = x * 2.0
        finally:
            box.ops += 1
        return y

    def make():
        box = Account()
        return (lambda x: f(x, box)), lambda: box.ops

    run_differential(make, [(vec(1.0, 2.0),)] * 5, min_graph_calls=2)

    @contextlib.contextmanager
    def custom():
        yield

    def g(x):
        with custom():
            return x + 1.0

    jitted = janus.jit(g)
    for _ in range(5):
        jitted(vec(1.0, 2.0))
    assert "wrapper around user function" in janus.explain(jitted)  # its __enter__ would run user code


def test_writes_to_objects_with_custom_setattr_run_imperatively():
    class Guarded:
        def __init__(self):
            object.__setattr__(self, "x", 0)

        def __setattr__(self, name, value):
            object.__setattr__(self, name, value)

    obj = Guarded()

    def f(t):
        obj.x = t
        return t

    jitted = janus.jit(f)
    for _ in range(5):
        jitted(vec(1.0))
    assert "defines __setattr__" in janus.explain(jitted)


@pytest.mark.parametrize("n", [3])
def test_heap_tensor_write_then_read_in_same_call(n):
    def make():
        acct = Account()

        def f(x):
            acct.balance = acct.balance * 0.5
            acct.balance = acct.balance + x  # reads the value written just above
            return acct.balance

        return f, lambda: acct.balance

    run_differential(make, [(tf.constant(float(i)),) for i in range(6)], min_graph_calls=n)


class Particle:
    def __init__(self, pos, hits=0):
        self.pos = pos
        self.hits = hits


class World:
    def __init__(self, n):
        self.particles = [Particle(tf.constant([float(i), 0.0]), i) for i in range(n)]


def test_run_time_objects_through_heap_ops_in_a_converted_loop():
    """List elements reached by a run-time index: the general PyGetSubscr/PyGetAttr/PySetAttr path."""

    def make():
        world = World(6)

        def step(n, dt):
            total = tf.zeros([2])
            for i in range(n):
                p = world.particles[i]
                p.pos = p.pos + dt
                p.hits = p.hits + 1
                total = total + p.pos
            return total

        return step, lambda: [(p.pos, p.hits) for p in world.particles]

    calls = [(tf.constant(k % 6), tf.constant([0.5, 1.0])) for k in (3, 5, 2, 4, 6, 1, 3, 0, 5)]
    jitted = run_differential(make, calls, min_graph_calls=4)
    library = jitted.cache.entries[0].graph.concrete.graph.as_graph_def().library.function
    assert {"JanusPyGetSubscr", "JanusPyGetAttr", "JanusPySetAttr"} <= {n.op for fn in library for n in fn.node_def}


def test_run_time_object_of_another_type_fails_the_assumption_and_falls_back():
    def make():
        world = World(4)

        def step(n):
            total = tf.zeros([2])
            for i in range(n):
                total = total + world.particles[i].pos
            return total

        def state():
            return [p.pos for p in world.particles]

        make.world = world
        return step, state

    eager_fn, _ = make()
    eager_world = make.world
    jit_src, _ = make()
    janus_world = make.world
    jitted = janus.jit(jit_src)
    for k, n in enumerate((2, 3, 4, 1, 2, 3, 4, 2)):
        if k == 5:  # a position becomes a float64 tensor: the graph's type assumption breaks
            for w in (eager_world, janus_world):
                w.particles[1].pos = tf.constant([1.0, 1.0], tf.float64)
        e = _outcome(eager_fn, (tf.constant(n),))
        j = _outcome(jitted, (tf.constant(n),))
        assert e[0] == j[0]
        if e[0] == "ok":
            assert_same(e[1], j[1])
    stats = janus.stats(jitted)
    assert stats["graph_calls"] >= 2 and stats["assumption_failures"] >= 1


def _outcome(fn, args):
    try:
        return "ok", fn(*args)
    except Exception as exc:  # noqa: BLE001
        return "raised", type(exc)


class LSTMState:
    def __init__(self):
        self.state = (tf.zeros([2]), tf.ones([2]))

    def __call__(self, x):
        h, c = self.state
        c = c * 0.5 + x
        h = tf.tanh(c)
        self.state = (h, c)
        return h


def test_tuple_state_on_self_is_read_item_by_item():
    def make():
        cell = LSTMState()

        def run(x):
            return cell(x)

        return run, lambda: cell.state

    jitted = run_differential(make, [(vec(0.1 * i, 0.2),) for i in range(8)], min_graph_calls=5)
    assert janus.stats(jitted)["graphs_built"] == 1


def test_heap_writes_under_tensor_control_flow_are_refused_not_logged_once():
    def make():
        acct = Account()

        def f(x, n):
            i = tf.constant(0)
            while i < n:  # varying trip count: a tf.while_loop, whose body runs many times
                acct.ops += 1
                i += 1
            return x

        return f, lambda: acct.ops

    calls = [(vec(1.0), tf.constant(k)) for k in (1, 2, 3, 1, 4)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert "heap write inside tensor-dependent control flow" in janus.explain(jitted)


def test_relaxed_int_counter_divided_and_moduloed():
    """`step / n`, `step // n`, `step % n == 0` on a counter relaxed to its type (an int64 input)."""

    def make():
        counter = Cache()
        counter.n = 0

        def f(x):
            scale = 1.0 - counter.n / 1000
            y = x * scale + (counter.n // 3)
            if counter.n % 2 == 0:
                y = y + 1.0
            counter.n += 1
            return y

        return f, lambda: counter.n

    run_differential(make, [(tf.constant(1.5),) for _ in range(12)], min_graph_calls=4)
