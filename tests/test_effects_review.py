# ruff: noqa: B028, UP032 - the shapes of user code under test (no stacklevel, str.format)
"""[semantics] Cases a reviewer found by trying to break the deferral of effects, as a user would.

Each runs the same program eagerly and under janus and compares everything after every call.
"""

import contextlib
import io
import logging
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same, captured_effects, run_differential

import janus


def test_a_warning_that_a_filter_turns_into_an_error_is_not_deferred():
    # Deferred, the warning would raise after the graph ran both updates; eager stops between them.
    def make():
        v = tf.Variable(0.0)

        def step(x):
            v.assign_add(x)
            warnings.warn("careful")
            v.assign_add(100.0)
            return v.read_value()

        return step, lambda: v

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        eager_fn, eager_v = make()
        raw, jit_v = make()
        jitted = janus.jit(raw)
        for _ in range(6):
            with pytest.raises(UserWarning):
                eager_fn(tf.constant(1.0))
            with pytest.raises(UserWarning):
                jitted(tf.constant(1.0))
            assert_same(eager_v(), jit_v())
    assert "turns UserWarning into an error" in janus.explain(jitted)


def test_summary_with_a_variable_default_step_logs_the_step_of_the_call(tmp_path):
    # The deferred write must use the step's value at the call, not after the graph's assign_add.
    def run(jit: bool) -> list[tuple[int, float]]:
        logdir = tmp_path / ("janus" if jit else "eager")
        writer = tf.summary.create_file_writer(str(logdir))
        steps = tf.Variable(0, dtype=tf.int64)

        def step(x):
            tf.summary.scalar("loss", x)
            steps.assign_add(1)
            return x * 2.0

        fn = janus.jit(step) if jit else step
        tf.summary.experimental.set_step(steps)
        try:
            with writer.as_default():
                for i in range(7):
                    fn(tf.constant(float(i)))
        finally:
            tf.summary.experimental.set_step(None)
        writer.close()
        if jit:
            assert janus.stats(fn)["graph_calls"] >= 3, janus.explain(fn)
        return _scalars(logdir)

    assert run(jit=True) == run(jit=False)


def test_summary_under_record_if_with_a_function_runs_imperatively(tmp_path):
    def run(jit: bool) -> list[tuple[int, float]]:
        logdir = tmp_path / ("janus" if jit else "eager")
        writer = tf.summary.create_file_writer(str(logdir))
        steps = tf.Variable(0, dtype=tf.int64)

        def step(x):
            tf.summary.scalar("loss", x, step=steps)
            steps.assign_add(1)
            return x

        fn = janus.jit(step) if jit else step
        with writer.as_default(), tf.summary.record_if(lambda: steps % 2 == 0):
            for i in range(7):
                fn(tf.constant(float(i)))
        writer.close()
        return _scalars(logdir)

    assert run(jit=True) == run(jit=False)


def _scalars(logdir) -> list[tuple[int, float]]:
    out = []
    for path in sorted(logdir.iterdir()):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                out.append((event.step, float(tf.make_ndarray(value.tensor))))
    return out


def test_text_is_formatted_from_the_values_at_the_expression():
    def make():
        state = {"last": 0}

        def step(x):
            y = x * 2.0
            msg = f"state={state} y={y}"
            joined = "{}|{}".format(state, y)
            state["last"] = 1
            print(msg)
            state["last"] = 0
            return y, msg, joined, "loss: " + str(y)

        return step, lambda: dict(state)

    jitted = run_differential(make, [(tf.constant(float(i)),) for i in range(7)], min_graph_calls=3)
    assert janus.stats(jitted)["imperative_calls"] == 0


def test_python_number_division_is_pythons_division():
    def make():
        state = {"step": 40}

        def step(x):
            state["step"] += 1
            progress = state["step"] / 49
            done = progress >= 1.0
            print("progress", progress, done)
            return x * progress, done

        return step, lambda: dict(state)

    run_differential(make, [(tf.constant(1.0),)] * 12, min_graph_calls=6)


def test_print_to_a_file_with_flush_and_warning_instances():
    def step(x):
        y = tf.reduce_sum(x)
        print("loss", y, file=sys.stderr, flush=True)
        warnings.warn(UserWarning("from an instance"))
        logging.getLogger("user.train").info("sum %s", y)
        return y

    jitted = janus.jit(step)
    for i in range(7):
        outcomes = []
        for fn in (step, jitted):
            err = io.StringIO()
            with captured_effects() as effects, contextlib.redirect_stderr(err):
                result = fn(tf.constant([float(i), 1.0]))
            outcomes.append((result, err.getvalue(), effects))
        assert_same(outcomes[0][0], outcomes[1][0])
        assert outcomes[0][1:] == outcomes[1][1:], f"call {i}: {outcomes}"
    assert janus.stats(jitted)["graph_calls"] >= 3, janus.explain(jitted)


def test_methods_a_heap_list_cannot_log_are_refused_with_a_reason():
    def make():
        buffer = [tf.constant(1.0)]

        def step(x):
            buffer.append(x)
            if len(buffer) > 3:
                buffer.reverse()
            return tf.add_n(buffer)

        return step, lambda: list(buffer)

    jitted = run_differential(make, [(tf.constant(float(i)),) for i in range(7)], min_graph_calls=0)
    assert "list.reverse() on a list that lives on the heap" in janus.explain(jitted)


def test_numpy_array_of_another_dtype_into_a_tensor_op():
    def make():
        w = tf.Variable([[0.5], [-1.0]])

        def step(x, y):
            # eager converts the float64 array to the dtype of the op's first input: float32 here
            pred = tf.matmul(tf.transpose(w), x, transpose_b=True)
            # and as its own dtype where it comes first: MatMul raises, in eager and under janus
            bad = tf.matmul(x, w) if y.shape[0] == 4 else None
            return tf.reduce_mean(tf.square(tf.transpose(pred) - y)), bad

        return step, lambda: w

    rng = np.random.default_rng(0)
    calls = [(rng.normal(size=(3, 2)), rng.normal(size=(3, 1)).astype(np.float32)) for _ in range(7)]
    calls.append((rng.normal(size=(3, 2)), rng.normal(size=(4, 1)).astype(np.float32)))
    run_differential(make, calls, min_graph_calls=3)
