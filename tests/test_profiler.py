"""The settrace profiler."""

import sys

import pytest
import tensorflow as tf

from janus.profiler import Profile, ScalarObs, SeqObs, TensorObs, observe, profiled_call


def helper(v):
    return v + 1


def target(x, n):
    if n > 1:
        y = helper(x)
    else:
        y = x
    for _ in range(n):
        y = y * 2
    return y


def test_records_arguments_lines_callees_and_returns():
    profile = Profile()
    args = (tf.constant([1.0, 2.0]), 3)
    observed = tuple(observe(a) for a in args)
    profiled_call(profile, target, args, {}, observed)
    record = profile.calls[0]
    assert isinstance(record.args[0], TensorObs) and record.args[0].shape == (2,)
    assert record.args[1] == ScalarObs(int, 3)
    assert isinstance(record.result, TensorObs)
    code = target.__code__
    first = code.co_firstlineno
    assert profile.hits(code, first + 2) == 1  # `y = helper(x)`: branch taken
    assert profile.hits(code, first + 4) == 0  # else side never ran
    assert profile.hits(code, first + 6) == 3  # loop body: trip count 3
    assert helper.__code__ in profile.callees[(code, first + 2)]
    assert profile.returns[helper.__code__] == {type(args[0])}


def test_library_frames_are_not_traced():
    profile = Profile()
    profiled_call(profile, target, (tf.constant(1.0), 1), {}, ())
    assert all("tensorflow" not in code.co_filename for code, _ in profile.line_hits)


def test_tracer_is_removed_and_previous_tracer_restored():
    events = []

    def outer_tracer(frame, event, arg):
        events.append(event)
        return None

    sys.settrace(outer_tracer)
    try:
        profiled_call(Profile(), target, (tf.constant(1.0), 1), {}, ())
        assert sys.gettrace() is outer_tracer
    finally:
        sys.settrace(None)
    assert sys.gettrace() is None


def test_exceptions_propagate_and_are_recorded():
    profile = Profile()

    def raises(x):
        raise KeyError(x)

    with pytest.raises(KeyError):
        profiled_call(profile, raises, (1,), {}, ())
    assert profile.calls[0].raised == "KeyError"
    assert sys.gettrace() is None


def test_observe_sequences_and_small_values():
    obs = observe([tf.constant(1), (2.0, "a")])
    assert isinstance(obs, SeqObs) and obs.type is list
    assert obs.items[0].value is not None  # small tensors keep their value
    big = observe(tf.zeros([100]))
    assert big.value is None


def loops(n, x):
    i = 0
    while i < n:
        i += 1
    for _ in range(n):
        for _ in range(2):
            x = x + 1
    return x


def test_trip_counts_per_loop_execution():
    profile = Profile()
    for n in (3, 3, 0):
        profiled_call(profile, loops, (n, 0), {}, ())
    code, first = loops.__code__, loops.__code__.co_firstlineno
    assert profile.trip_counts[(code, first + 2)] == [3, 3, 0]  # while
    assert profile.trip_counts[(code, first + 4)] == [3, 3, 0]  # outer for
    assert profile.trip_counts[(code, first + 5)] == [2] * 6  # inner for, once per outer iteration
    assert profile.fixed_trip_count(code, first + 5) == 2
    assert profile.fixed_trip_count(code, first + 2) is None


def branchy(xs):
    out = []
    for x in xs:
        if x > 1:
            out.append(x)
        elif x < 0:
            out.append(-x)
    return out


def test_branch_outcome_sequences_per_call():
    profile = Profile()
    profiled_call(profile, branchy, ([0, 2, -1],), {}, ())
    profiled_call(profile, branchy, ([3],), {}, ())
    first = branchy.__code__.co_firstlineno
    assert profile.branch_sequences(branchy.__code__, first + 3) == [(False, True, False), (True,)]
    assert profile.branch_sequences(branchy.__code__, first + 5) == [(False, True), ()]
