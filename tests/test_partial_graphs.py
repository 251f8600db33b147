"""[partial] A function with a statement janus cannot convert runs split at statement level: the runs
of statements around it are served by graphs of their own (segments), the rest runs in Python.
Every call is compared with eager (results, printed text, variables, Python state)."""

import logging

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential

import janus

pytestmark = pytest.mark.usefixtures("split_only")  # tests the split itself (conftest.py)


CALLS = 10  # the function profiles 3 calls, then its segments 3 each, a segment split again 3 more


@pytest.fixture(autouse=True)
def segments_keep_their_graphs(monkeypatch):
    """These segments are a few small ops each, which the cost check would run eagerly (it has its
    own tests in test_segment_cost.py): here every segment keeps its graph, so its use is asserted."""
    monkeypatch.setattr(janus.config, "segment_cost_check", False)


def segments_served(jitted, at_least: int = 1) -> dict:
    stats = janus.stats(jitted)
    assert stats["segment_calls"] >= at_least, f"segments served too few calls: {stats}\n{janus.explain(jitted)}"
    assert stats["split_calls"] > 0
    return stats


def batch(n: int, rows: int = 4) -> tuple:
    x = tf.constant(np.random.default_rng(n).normal(size=(rows, 3)), tf.float32)
    y = tf.constant(np.random.default_rng(100 + n).normal(size=(rows, 1)), tf.float32)
    return x, y


def test_numpy_logging_in_a_train_step_tape_before_gradient_after():
    def make():
        w = tf.Variable(np.linspace(-1, 1, 3).reshape(3, 1), dtype=tf.float32)
        b = tf.Variable([0.5])

        def step(x, y):
            with tf.GradientTape() as tape:
                h = tf.tanh(x @ w)
                print(f"h {h.numpy().mean():.3f}")  # a break inside the tape's block
                loss = tf.reduce_mean((h + b - y) ** 2)
            print(f"loss {loss.numpy():.3f}")
            gw, gb = tape.gradient(loss, [w, b])  # across segments: h and loss came from graphs
            w.assign_sub(0.1 * gw)
            b.assign_sub(0.1 * gb)
            return loss

        return step, lambda: [w, b]

    jitted = run_differential(make, [batch(n) for n in range(CALLS)], min_graph_calls=0)
    segments_served(jitted, 3)
    text = janus.explain(jitted)
    assert "runs split into" in text and "test_partial_graphs.py:" in text and "[tensor value]" in text


def test_float_of_the_loss_in_a_python_loop_over_batches():
    def make():
        w = tf.Variable(np.ones((3, 1)), dtype=tf.float32)

        def epoch(batches):
            total = 0.0
            for x, y in batches:
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean((x @ w - y) ** 2)
                w.assign_sub(0.05 * tape.gradient(loss, w))  # tape read in the same segment: a graph
                total += float(loss)
            return total / len(batches)

        return epoch, lambda: w

    calls = [([batch(n), batch(n + 1), batch(n + 2)],) for n in range(CALLS)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    stats = segments_served(jitted, 3 * 3)  # a segment per batch, three batches a call
    assert stats["imperative_calls"] == 0


def test_break_inside_an_if_branch():
    def make():
        w = tf.Variable([1.0, 2.0, 3.0])

        def train(xs, limit):
            steps = 0
            for x in xs:
                w.assign_add(0.1 * x)
                norm = tf.norm(w)
                print(f"norm {norm.numpy():.3f}")
                steps += 1
                if steps >= limit:
                    print("stopping")
                    break
            return steps, w * 2.0

        return train, lambda: w

    xs = [tf.constant([1.0, -1.0, 0.5]) * k for k in range(1, 5)]
    jitted = run_differential(make, [(xs, 2 + n % 3) for n in range(CALLS)], min_graph_calls=0)
    segments_served(jitted, 3)


def test_numpy_metric_on_numpy_predictions():
    def make():
        w = tf.Variable(np.random.default_rng(0).normal(size=(3, 4)), dtype=tf.float32)

        def evaluate(x, labels):
            logits = x @ w
            pred = tf.nn.softmax(logits)
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, pred))
            accuracy = np.mean(pred.numpy().argmax(1) == labels)  # numpy, as scikit-learn metrics are
            w.assign_sub(0.01 * tf.ones_like(w))
            return loss, accuracy

        return evaluate, lambda: w

    rng = np.random.default_rng(1)
    calls = [(tf.constant(rng.normal(size=(8, 3)), tf.float32), rng.integers(0, 4, size=8)) for _ in range(CALLS)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    segments_served(jitted, 3)


def test_try_except_around_a_convertible_block():
    def make():
        w = tf.Variable(np.ones((3, 2)), dtype=tf.float32)

        def safe(x):
            total = None
            try:
                total = tf.reduce_sum(x @ w)
                checked = tf.debugging.check_numerics(tf.math.log(total), "log of a negative sum")
                w.assign_add(0.01 * tf.ones_like(w))
            except tf.errors.InvalidArgumentError:
                checked = total * 0.0  # eager had bound `total` before the raise
            return checked + 1.0

        return safe, lambda: w

    calls = [(tf.constant(np.full((2, 3), 1.0 + n), tf.float32),) for n in range(CALLS)]
    calls[7] = (tf.constant(np.full((2, 3), -1.0), tf.float32),)  # raises after the graphs are built
    calls[9] = (tf.constant(np.full((2, 3), -2.0), tf.float32),)
    jitted = run_differential(make, calls, min_graph_calls=0)
    # The try is converted (test_caught_try.py): the whole function's graph serves calls 3-6 and 8;
    # calls 7 and 9 raise in it and run eagerly, after which the function runs split, the try in Python.
    assert janus.stats(jitted)["graph_calls"] >= 4 and jitted.split is not None, janus.explain(jitted)


def log_loss(loss):
    print(f"loss {loss.numpy():.4f}")


def test_unconvertible_statement_in_a_called_user_function():
    def make():
        w = tf.Variable(np.ones((3, 1)), dtype=tf.float32)

        def step(x, y):
            err = x @ w - y
            loss = tf.reduce_mean(err**2)
            log_loss(loss)  # the refusal is inside log_loss: this call stays Python
            w.assign_sub(0.1 * tf.reduce_mean(err * x, axis=0, keepdims=True)[0][:, None])
            return loss

        return step, lambda: w

    jitted = run_differential(make, [batch(n) for n in range(CALLS)], min_graph_calls=0)
    segments_served(jitted, 3)
    text = janus.explain(jitted)
    assert f"{log_loss.__code__.co_filename}:{log_loss.__code__.co_firstlineno + 1}" in text  # where it refused


def test_exception_raised_in_the_middle():
    def make():
        w = tf.Variable([0.0, 0.0])

        def step(x, fail):
            w.assign_add(x)
            print(f"w {w.numpy()[0]:.2f}")
            if fail:
                raise ValueError("asked to fail")
            w.assign_add(2.0 * x)
            return w * 1.0

        return step, lambda: w

    calls = [(tf.constant([1.0, 2.0]), n in (5, 8)) for n in range(CALLS)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    segments_served(jitted, 3)


def test_python_variable_defined_in_a_segment_used_after_the_break():
    def make():
        def scaled(x):
            rows = int(x.shape[0])
            scale = 2.0 * rows
            y = tf.nn.relu(x) * scale
            print(f"{y.numpy().sum():.2f}")
            return y + scale, scale, rows

        return scaled, lambda: None

    calls = [(tf.constant(np.arange(4.0) + n, tf.float32),) for n in range(CALLS)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    segments_served(jitted, 3)


def test_list_appended_in_a_segment_read_in_python_after():
    def make():
        history = []

        def record(x):
            history.append(x * 2.0)
            y = tf.reduce_sum(x)
            print(len(history), f"{y.numpy():.2f}")
            history.append(y)
            return y

        return record, lambda: list(history)

    calls = [(tf.constant([1.0, float(n)]),) for n in range(CALLS)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    segments_served(jitted, 3)


def run_logging_step(caplog) -> janus.JitFunction:
    """A step that prints a `.numpy()` between two runs of graph math, jitted and called CALLS times."""

    def step(x):
        y = tf.square(x) * 2.0
        print(f"{y.numpy().sum():.1f}")
        return tf.reduce_sum(y + 1.0)

    jitted = janus.jit(step)
    with caplog.at_level(logging.WARNING, logger="janus"):
        for n in range(CALLS):
            jitted(tf.constant([float(n)]))
    return jitted


def test_switched_off_the_function_runs_imperatively(caplog):
    janus.config.partial_graphs = False

    jitted = run_logging_step(caplog)
    stats = janus.stats(jitted)
    assert stats["segment_calls"] == 0 and stats["imperative_calls"] > 0
    assert any("runs imperatively" in r.getMessage() for r in caplog.records)


def test_the_warning_says_it_runs_split_with_the_reason(caplog):
    jitted = run_logging_step(caplog)
    warnings = [r.getMessage() for r in caplog.records if "runs split" in r.getMessage()]
    assert len(warnings) == 1 and "numpy" in warnings[0], warnings
    assert not any("runs imperatively" in r.getMessage() for r in caplog.records)
    segments_served(jitted, 3)


@pytest.mark.parametrize("strict", [True])
def test_strict_still_raises(strict):
    def step(x):
        y = tf.square(x) * 2.0
        print(f"{y.numpy().sum():.1f}")
        return y

    jitted = janus.jit(step, strict=strict)
    with pytest.raises(janus.StrictModeError):
        for n in range(CALLS):
            jitted(tf.constant([float(n)]))


def test_a_loop_carried_value_only_the_segment_reads():
    def make():
        acc = tf.Variable(tf.zeros(3))

        def rnn(xs):
            h = tf.zeros(3)
            total = 0
            for x in xs:
                h = tf.tanh(h * 0.5 + x)  # read at the next turn by this segment only: still a live-out
                acc.assign_add(h)
                total += int(tf.reduce_sum(tf.cast(x > 0, tf.int32)))
            return total

        return rnn, lambda: acc

    xs = [tf.constant([1.0, -2.0, 0.5]) * k for k in range(1, 4)]
    jitted = run_differential(make, [(xs,)] * CALLS, min_graph_calls=0)
    segments_served(jitted, 3)


class Counter:
    def __init__(self):
        self.w = tf.Variable([1.0, 1.0])
        self.steps = 0
        self.seen = []

    def step(self, x):
        self.w.assign_add(x)
        self.steps += 1
        self.seen.append(float(tf.reduce_sum(self.w)))  # Python
        return self.w * float(self.steps)


def test_a_method_writing_attributes_in_segments():
    def make():
        counter = Counter()
        return counter.step, lambda: (counter.w, counter.steps, list(counter.seen))

    jitted = run_differential(make, [(tf.constant([0.5, float(n)]),) for n in range(CALLS)], min_graph_calls=0)
    segments_served(jitted, 3)


def test_a_checkpoint_and_summaries_every_few_steps(tmp_path):
    """Shapes of public training loops: the step writes a checkpoint and TensorBoard scalars every
    few steps (file I/O janus cannot convert): those statements stay Python, the math is segments."""

    def make():
        w = tf.Variable(np.ones((3, 1)), dtype=tf.float32)
        opt_step = tf.Variable(0, dtype=tf.int64)
        folder = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        checkpoint = tf.train.Checkpoint(w=w, step=opt_step)
        writer = tf.summary.create_file_writer(str(folder))
        saved = []

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((x @ w - y) ** 2)
            w.assign_sub(0.05 * tape.gradient(loss, w))
            opt_step.assign_add(1)
            if int(opt_step) % 3 == 0:
                saved.append(checkpoint.write(str(folder / "ckpt")).rsplit("/", 1)[-1])
                with writer.as_default():
                    tf.summary.scalar("loss", loss, step=opt_step)
            return loss

        return step, lambda: [w, opt_step, list(saved)]

    jitted = run_differential(make, [batch(n) for n in range(CALLS + 2)], min_graph_calls=0)
    segments_served(jitted, 3)


def test_a_loop_over_a_dataset_janus_does_not_convert():
    """`for x in dataset` over a pipeline that runs Python (from_generator: refused in a graph):
    the loop stays Python, its body a segment."""

    def make():
        w = tf.Variable([[0.5], [-0.5], [1.0]])

        def rows():
            for i in range(4):
                yield np.full((2, 3), i, np.float32)

        dataset = tf.data.Dataset.from_generator(rows, output_signature=tf.TensorSpec((2, 3), tf.float32))

        def epoch(scale):
            total = tf.constant(0.0)
            for x in dataset:
                total += tf.reduce_sum(x @ w) * scale
            return total

        return epoch, lambda: w

    jitted = run_differential(make, [(tf.constant(float(n)),) for n in range(CALLS)], min_graph_calls=0)
    segments_served(jitted, 3)


def test_equal_segment_code_objects_keep_their_own_registered_sources():
    """Two splits of one function compile equal code objects (code compares by value): each must
    find its own AST, also after the other died (a WeakKeyDictionary shared one entry, and the
    first code's death dropped the second's: its segment then read the whole function)."""
    import gc

    import gast

    from janus.graphgen import source

    text = "def seg(a):\n    return a + 1\n"
    first = compile(text, "<janus-test>", "exec").co_consts[0]
    second = compile(text, "<janus-test>", "exec").co_consts[0]
    assert first == second and first is not second
    node_a, node_b = gast.parse(text).body[0], gast.parse(text).body[0]
    source.register_ast(first, node_a)
    source.register_ast(second, node_b)
    assert source.function_ast(first) is node_a and source.function_ast(second) is node_b
    del first
    gc.collect()
    assert source.function_ast(second) is node_b
