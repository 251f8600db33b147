"""[effects/output]: printing, logging, warnings and TF summaries inside a jitted step.

These effects are deferred, not refused: the graph serves the call, and once it succeeded janus
replays the call's effects with the materialized values, in program order. What a call prints,
logs (records, levels, messages), warns, and writes to a summary writer must be exactly what
eager execution produces for that call: a tensor argument renders as the EagerTensor's str/repr
of *this* call's value, a container renders with the contents it had at the print, and the
effects of one call are neither dropped, duplicated nor taken from the call that built the graph.
"""

# The steps format tensors the ways users do (str.format, %, warnings without stacklevel): keep them.
# ruff: noqa: B028, UP031, UP032

import glob
import logging
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same, outcome, run_differential

import janus

log = logging.getLogger("user.train")


def vec(*values):
    return tf.constant(values, tf.float32)


def batches(n, size=3):
    return [(vec(*[0.1 * (i + 1) + 0.05 * k for k in range(size)]),) for i in range(n)]


# ---------------------------------------------------------------------------------- logging


class LoggingTrainer:
    def __init__(self):
        self.w = tf.constant([0.5, -0.5, 1.0])
        self.step = 0

    def train_step(self, x):
        loss = tf.reduce_mean(tf.square(self.w * x - 1.0))
        self.w = self.w - 0.1 * x
        self.step += 1
        logging.info("step %d loss %s", self.step, loss)
        return loss


def test_root_logging_info_of_step_and_loss(caplog):
    caplog.set_level(logging.INFO)

    def make():
        trainer = LoggingTrainer()

        def train_step(x):
            return trainer.train_step(x)

        return train_step, lambda: (trainer.w, trainer.step)

    run_differential(make, batches(10), min_graph_calls=3)


def test_module_logger_warning_with_tensor_arguments():
    """A module logger: ``warning`` is recorded (tensor rendered like eager), ``info`` is filtered by level."""

    def make():
        state = {"best": tf.constant(10.0), "bad_steps": 0}

        def evaluate(x):
            loss = tf.reduce_sum(x * x)
            log.info("evaluating %s", x)  # below the effective WARNING level: no record in either mode
            log.warning("val loss %s (best %s)", loss, state["best"])
            log.warning("grad norm %.4f", tf.norm(x))
            state["best"] = tf.minimum(state["best"], loss)
            state["bad_steps"] += 1
            return loss

        return evaluate, lambda: dict(state)

    run_differential(make, batches(10), min_graph_calls=3)


# ---------------------------------------------------------------------------------- warnings


def test_warnings_warn_once_per_call_like_eager():
    """Constant messages, a RuntimeWarning category, and one warning site reached twice in an unrolled loop."""

    def make():
        layers = [tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0])]

        def step(x):
            warnings.warn("lr is high")
            total = tf.zeros([2])
            for w in layers:  # same site twice per call: the "default" filter shows it once per call
                warnings.warn("layer weights are large", RuntimeWarning)
                total = total + w * x
            return total

        return step, lambda: None

    run_differential(make, [(vec(0.1 * i, 1.0),) for i in range(8)], min_graph_calls=3)


def test_warning_message_formatted_from_the_calls_loss():
    def make():
        def step(x):
            loss = tf.reduce_sum(x)
            warnings.warn("loss went up: {}".format(loss))
            return loss * 2.0

        return step, lambda: None

    run_differential(make, batches(8), min_graph_calls=3)


# ---------------------------------------------------------------------------------- print


def test_tensor_formatting_in_prints():
    def make():
        def report(x):
            loss = tf.reduce_mean(x * x)
            print("loss {}".format(loss))
            print("loss %s" % loss)
            print(f"loss {loss}")
            print(f"{loss:.3f}")  # EagerTensor.__format__ with a spec formats the scalar's value
            print("loss %.2f" % loss)
            print("loss", loss)
            print(repr(loss))
            return loss

        return report, lambda: None

    run_differential(make, batches(8), min_graph_calls=3)


def test_float_format_spec_on_a_vector_raises_like_eager():
    """``f"{vector:.3f}"`` raises TypeError in eager after the first line is printed; janus must agree."""

    def make():
        def report(x):
            y = x * 2.0
            print("before", y)
            print(f"{y:.3f}")
            return y

        return report, lambda: None

    run_differential(make, batches(6), min_graph_calls=0)


class History:
    def __init__(self):
        self.metrics = {}
        self.seen = []
        self.step = 0


def test_print_shows_containers_as_they_were_at_the_print():
    """The function fills a dict and a list after printing them: eager prints the earlier contents."""

    def make():
        hist = History()

        def step(x):
            loss = tf.reduce_sum(x)
            print("metrics so far:", hist.metrics)
            print("seen:", hist.seen)
            hist.metrics["loss"] = loss
            hist.seen.append(loss)
            hist.step += 1
            d = {"step": hist.step}
            print(d)
            d["loss"] = loss
            return d

        return step, lambda: (dict(hist.metrics), list(hist.seen), hist.step)

    run_differential(make, batches(10), min_graph_calls=3)


class _StdoutHandler(logging.Handler):
    """Writes records to whatever sys.stdout is at emit time, so log and print lines interleave."""

    def emit(self, record):
        sys.stdout.write(f"LOG {record.levelname} {record.getMessage()}\n")


class Counter:
    def __init__(self):
        self.calls = 0
        self.last = None


def test_print_attribute_write_and_log_interleaved_in_program_order():
    order_log = logging.getLogger("user.order")
    handler = _StdoutHandler()
    order_log.addHandler(handler)
    try:

        def make():
            box = Counter()

            def step(x):
                loss = tf.reduce_max(x)
                print("begin", box.calls, box.last)
                box.calls += 1
                box.last = loss
                order_log.warning("calls=%d last=%s", box.calls, box.last)
                box.last = loss * 2.0
                print("end", box.calls, box.last)
                return loss

            return step, lambda: (box.calls, box.last)

        run_differential(make, batches(10), min_graph_calls=3)
    finally:
        order_log.removeHandler(handler)


def test_effects_of_a_call_whose_assumption_fails_appear_once():
    """A speculated branch fails on call 6: the call falls back, yet prints, logs and warns once, like eager."""

    def make():
        box = Counter()

        def step(x, flag):
            box.calls += 1
            print("step", box.calls, "input", x)
            log.warning("flag %s", flag)
            warnings.warn("checking flag")
            if tf.reduce_sum(flag) > 0:
                y = x * 2.0
            else:
                y = x - 1.0
            print("result", y)
            return y

        return step, lambda: box.calls

    on, off = tf.constant([1]), tf.constant([-1])
    calls = [(vec(1.0, float(i)), off if i == 6 else on) for i in range(10)]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert janus.stats(jitted)["assumption_failures"] >= 1


# ---------------------------------------------------------------------------------- tf.summary


def summary_api(kind):
    if kind == "scalar":
        pytest.importorskip("tensorboard")  # tf.summary.scalar's implementation lives in tensorboard
        return tf.summary.scalar
    return tf.summary.write  # the core op: no tensorboard needed


def read_events(logdir):
    """(tag, step, value) of every summary value in the writer's event files, in file order."""
    rows = []
    for path in sorted(glob.glob(f"{logdir}/events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                rows.append((value.tag, int(event.step), float(tf.make_ndarray(value.tensor))))
    return rows


def assert_same_events(eager_dir, janus_dir):
    expected, actual = read_events(eager_dir), read_events(janus_dir)
    assert len(actual) == len(expected), f"janus wrote {actual}, eager wrote {expected}"
    for n, (e, a) in enumerate(zip(expected, actual)):
        assert a[:2] == e[:2], f"event {n}: janus {a}, eager {e}"
        np.testing.assert_allclose(a[2], e[2], rtol=1e-5, err_msg=f"event {n}")
    return expected


class Stepper:
    def __init__(self):
        self.w = tf.Variable([1.0, -1.0, 0.5])
        self.step = 0


def make_summary_step(emit):
    model = Stepper()

    def train_step(x):
        loss = tf.reduce_sum(tf.square(model.w * x))
        model.w.assign_sub(0.05 * x)
        emit("loss", loss, step=model.step)
        model.step += 1
        return loss

    return train_step, lambda: (model.w, model.step)


@pytest.mark.parametrize("kind", ["write", "scalar"])
def test_summary_with_python_int_step_under_caller_writer_and_record_if(tmp_path, kind):
    emit = summary_api(kind)
    runs = {}
    for mode in ("eager", "janus"):
        fn, state = make_summary_step(emit)
        fn = janus.jit(fn) if mode == "janus" else fn
        runs[mode] = (fn, state, tf.summary.create_file_writer(str(tmp_path / mode)))

    for i, args in enumerate(batches(10)):
        outcomes = {}
        for mode, (fn, _, writer) in runs.items():
            with writer.as_default(), tf.summary.record_if(i % 3 != 1):  # not recorded on calls 1, 4, 7
                outcomes[mode] = outcome(fn, args, {})
        expected, actual = outcomes["eager"], outcomes["janus"]
        assert actual[0] == expected[0], f"call {i}: eager {expected}, janus {actual}"
        assert_same(expected[1], actual[1], f"call {i} result")
        assert actual[2] == expected[2], f"call {i}: effects differ: eager {expected[2]}, janus {actual[2]}"
        assert_same(runs["eager"][1](), runs["janus"][1](), f"call {i} state")
    for _, _, writer in runs.values():
        writer.flush()
        writer.close()
    events = assert_same_events(tmp_path / "eager", tmp_path / "janus")
    assert [step for _, step, _ in events] == [0, 2, 3, 5, 6, 8, 9]
    stats = janus.stats(runs["janus"][0])
    assert stats["graph_calls"] >= 3, f"graphs served too few calls: {stats}\n{janus.explain(runs['janus'][0])}"


@pytest.mark.parametrize("kind", ["write", "scalar"])
def test_summary_default_step_set_by_the_caller(tmp_path, kind):
    """``tf.summary.experimental.set_step(i)`` with a Python int before each call; no ``step=`` inside."""
    emit = summary_api(kind)

    def make_metric():
        def log_metric(x):
            t = tf.reduce_mean(x) * 3.0
            emit("x", t)
            return t

        return log_metric

    eager_fn, jitted = make_metric(), janus.jit(make_metric())
    writers = {m: tf.summary.create_file_writer(str(tmp_path / m)) for m in ("eager", "janus")}
    try:
        for i, args in enumerate(batches(9)):
            outcomes = {}
            for mode, fn in (("eager", eager_fn), ("janus", jitted)):
                tf.summary.experimental.set_step(100 + 7 * i)
                with writers[mode].as_default():
                    outcomes[mode] = outcome(fn, args, {})
            expected, actual = outcomes["eager"], outcomes["janus"]
            assert actual[0] == expected[0], f"call {i}: eager {expected}, janus {actual}"
            assert_same(expected[1], actual[1], f"call {i} result")
            assert actual[2] == expected[2], f"call {i}: effects differ"
    finally:
        tf.summary.experimental.set_step(None)
    for writer in writers.values():
        writer.flush()
        writer.close()
    events = assert_same_events(tmp_path / "eager", tmp_path / "janus")
    assert [step for _, step, _ in events] == [100 + 7 * i for i in range(9)]
    stats = janus.stats(jitted)
    assert stats["graph_calls"] >= 3, f"graphs served too few calls: {stats}\n{janus.explain(jitted)}"
