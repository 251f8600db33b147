"""User finalizers that the garbage collector would run while a library call generates a graph."""

import gc

import pytest
import tensorflow as tf

from janus.graphgen import sandbox


def _started_generator_in_a_cycle(log: list) -> None:
    def lines():
        try:
            yield 1
        finally:
            log.append("closed")

    generator = lines()
    next(generator)
    box: list = [generator]
    box.append(box)  # only the cyclic collector frees it


@pytest.fixture
def eager_collection():
    threshold = gc.get_threshold()
    gc.collect()
    yield
    gc.set_threshold(*threshold)


def test_a_collection_during_a_library_call_neither_stops_it_nor_skips_a_finally(eager_collection):
    """Eager runs the generator's finally when the collector frees it; janus must too, and a library
    call must not be refused because the collector happened to run user code inside it."""
    log: list = []
    gc.disable()
    _started_generator_in_a_cycle(log)  # garbage now, freed at the next collection
    gc.enable()
    with sandbox.library_call("tf.matmul", "here"):
        gc.set_threshold(1, 1, 1)
        tf.matmul(tf.ones((2, 2)), tf.ones((2, 2)))
        _ = list(map(list, ["ab"] * 100))  # allocations that would start a collection (no Python frame)
    gc.set_threshold(700, 10, 10)
    gc.collect()
    assert log == ["closed"]


def test_the_collector_stays_off_when_the_user_turned_it_off(eager_collection):
    gc.disable()
    try:
        with sandbox.library_call("tf.matmul", "here"):
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    with sandbox.library_call("tf.matmul", "here"):
        assert not gc.isenabled()
    assert gc.isenabled()
