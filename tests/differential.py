"""Differential testing: the same program run plainly in eager and under janus.

Every output and every piece of Python/TF state is compared after every call,
including calls where an assumption fails. Non-float values must be identical,
floats equal within rtol 1e-5.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import tensorflow as tf

import janus

RTOL = 1e-5
ATOL = 1e-6


def assert_same(expected: object, actual: object, where: str = "result") -> None:
    if isinstance(expected, tf.Variable):
        assert isinstance(actual, tf.Variable), f"{where}: {type(actual)} is not a Variable"
        assert_same(expected.read_value(), actual.read_value(), where)
        return
    if isinstance(expected, (tf.Tensor, np.ndarray)):
        assert isinstance(actual, type(expected)) or (
            isinstance(expected, tf.Tensor) and isinstance(actual, tf.Tensor)
        ), f"{where}: {type(actual).__name__} != {type(expected).__name__}"
        e, a = np.asarray(expected), np.asarray(actual)
        assert e.dtype == a.dtype, f"{where}: dtype {a.dtype} != {e.dtype}"
        assert e.shape == a.shape, f"{where}: shape {a.shape} != {e.shape}"
        if np.issubdtype(e.dtype, np.floating) or np.issubdtype(e.dtype, np.complexfloating):
            np.testing.assert_allclose(a, e, rtol=RTOL, atol=ATOL, err_msg=where)
        else:
            np.testing.assert_array_equal(a, e, err_msg=where)
        return
    assert type(actual) is type(expected), f"{where}: {type(actual).__name__} != {type(expected).__name__}"
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{where}: length {len(actual)} != {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{where}: keys {list(actual)} != {list(expected)}"
        for k in expected:
            assert_same(expected[k], actual[k], f"{where}[{k!r}]")
    elif isinstance(expected, float):
        np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL, err_msg=where)
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith("janus"):
            self.records.append((record.name, record.levelname, record.getMessage()))


@contextlib.contextmanager
def captured_effects() -> Iterator[dict]:
    """Captures what a call prints, warns and logs (janus's own log records excepted)."""
    effects: dict = {}
    handler = _Records()
    root = logging.getLogger()
    root.addHandler(handler)
    out = io.StringIO()
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
            warnings.simplefilter("default")
            # TensorFlow's AutoGraph under Python 3.13 (ast nodes built with its own keyword) warns when
            # it converts a function: at trace time, which is every eager call but janus's graph build.
            warnings.filterwarnings("ignore", message=".*___pyct_anno", category=DeprecationWarning)
            yield effects
    finally:
        root.removeHandler(handler)
    effects["stdout"] = out.getvalue()
    effects["warnings"] = [(w.category.__name__, str(w.message)) for w in caught]
    effects["logs"] = handler.records


def outcome(fn: Callable, args: tuple, kwargs: dict | None = None) -> tuple[str, object, dict]:
    """``("ok", result, effects)`` or ``("raised", exception type, effects)`` of one call."""
    kwargs = kwargs or {}
    with captured_effects() as effects:
        try:
            outcome = ("ok", fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - the exception type is part of the behaviour
            outcome = ("raised", type(exc))
    return (*outcome, effects)


Call = tuple | tuple[tuple, dict]


def run_differential(
    make: Callable[[], tuple[Callable, Callable[[], object]]],
    calls: Iterable[tuple],
    *,
    kwargs: Iterable[dict] | None = None,
    min_graph_calls: int = 1,
    jit_kwargs: dict | None = None,
) -> janus.JitFunction:
    """Runs ``make()``'s program eagerly and under janus over ``calls``, comparing everything.

    ``make`` returns ``(function, state)``; ``state()`` snapshots whatever Python/TF state
    the program touches. It is called twice so each mode has its own state. What each call
    prints, warns (``warnings.warn``) and logs (``logging``) must be the same too.
    """
    eager_fn, eager_state = make()
    raw_fn, jit_state = make()
    jitted = janus.jit(raw_fn, **(jit_kwargs or {}))
    calls = list(calls)
    kwargs = list(kwargs) if kwargs is not None else [{}] * len(calls)
    for n, (args, kw) in enumerate(zip(calls, kwargs)):
        assert_same_call(n, outcome(eager_fn, args, kw), outcome(jitted, args, kw), eager_state, jit_state)
    assert_served(jitted, min_graph_calls)
    return jitted


def run_differential_fd(make, calls, capfd, *, prefixes: tuple[str, ...], min_graph_calls: int) -> janus.JitFunction:
    """``run_differential`` that also compares the lines starting with ``prefixes`` that each call
    writes to the process's stdout and stderr (``capfd``): where a graph ``tf.print`` writes."""
    eager_fn, eager_state = make()
    raw_fn, jit_state = make()
    jitted = janus.jit(raw_fn)
    capfd.readouterr()
    for n, args in enumerate(calls):
        expected = outcome(eager_fn, args)
        eager_text = fd_lines(capfd, prefixes)
        actual = outcome(jitted, args)
        janus_text = fd_lines(capfd, prefixes)
        assert janus_text == eager_text, f"call {n}: eager printed {eager_text}, janus {janus_text}"
        assert_same_call(n, expected, actual, eager_state, jit_state)
    assert_served(jitted, min_graph_calls)
    return jitted


def fd_lines(capfd, prefixes: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The lines starting with ``prefixes`` written to stdout and to stderr since the last read."""
    captured = capfd.readouterr()
    return tuple([line for line in text.splitlines() if line.startswith(prefixes)] for text in captured)


def assert_same_call(n: int, expected: tuple, actual: tuple, eager_state, jit_state) -> None:
    """Call ``n`` gave eager's outcome (result or exception, printed/warned/logged effects) and state."""
    assert actual[0] == expected[0], f"call {n}: eager {expected}, janus {actual}"
    assert_same(expected[1], actual[1], f"call {n} result")
    assert actual[2] == expected[2], f"call {n}: effects differ: eager {expected[2]}, janus {actual[2]}"
    assert_same(eager_state(), jit_state(), f"call {n} state")


def assert_served(jitted: janus.JitFunction, min_graph_calls: int) -> None:
    stats = janus.stats(jitted)
    assert stats["graph_calls"] >= min_graph_calls, f"graphs served too few calls: {stats}\n{janus.explain(jitted)}"


def no_state() -> None:
    return None
