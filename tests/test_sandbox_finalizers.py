"""User code that runs inside a library call made while generating, without the library calling
it: the finalizers a garbage collection runs there, and Python signal handlers. Eager runs them;
so must janus, and a generation must not be refused because one happened to run."""

import functools
import gc
import signal

import pytest
import tensorflow as tf

from janus.graphgen import sandbox
from janus.graphgen.errors import NotConvertible


def _started_generator_in_a_cycle(log: list) -> None:
    def lines():
        try:
            yield 1
        finally:
            log.append(_closed())

    generator = lines()
    next(generator)
    box: list = [generator]
    box.append(box)  # only the cyclic collector frees it


def _closed() -> str:  # a user function the finalizer calls in turn
    return "closed"


@pytest.fixture
def collection_every_allocation():
    threshold = gc.get_threshold()
    gc.collect()
    yield functools.partial(gc.set_threshold, 1, 1, 1)  # no Python frame: the sandbox would stop it
    gc.set_threshold(*threshold)


def test_a_collection_during_a_library_call_neither_stops_it_nor_skips_a_finally(collection_every_allocation):
    log: list = []
    gc.disable()
    _started_generator_in_a_cycle(log)  # garbage now, freed at the next collection
    gc.enable()
    with sandbox.library_call("tf.matmul", "here"):
        collection_every_allocation()
        tf.matmul(tf.ones((2, 2)), tf.ones((2, 2)))
        _ = list(map(list, ["ab"] * 100))  # allocations that start a collection (no Python frame)
    assert log == ["closed"]


def test_the_collectors_state_is_the_users():
    """The sandbox neither turns the collector off nor back on (other threads would see it)."""
    for enabled in (False, True):
        (gc.enable if enabled else gc.disable)()
        with sandbox.library_call("tf.matmul", "here"):
            assert gc.isenabled() is enabled
        assert gc.isenabled() is enabled
    gc.enable()


def test_a_signal_handler_runs_inside_a_library_call():
    received: list = []

    def handler(signum, frame):
        received.append(_closed())

    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        with sandbox.library_call("tf.matmul", "here"):
            signal.raise_signal(signal.SIGUSR1)
            tf.matmul(tf.ones((2, 2)), tf.ones((2, 2)))
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert received == ["closed"]


def test_user_code_the_library_calls_still_stops_it():
    """After a finalizer ran, the sandbox still refuses user code that the library itself calls."""
    log: list = []
    gc.disable()
    _started_generator_in_a_cycle(log)
    gc.enable()
    gc.collect()
    with pytest.raises(NotConvertible, match="user code"), sandbox.library_call("tf.map_fn", "here"):
        tf.map_fn(lambda v: _closed() and v, tf.ones(3))
    assert log == ["closed"]
