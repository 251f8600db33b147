"""The C++ op build and JanusAssert."""

import numpy as np
import pytest
import tensorflow as tf

from janus.ops import build, failed_assumption_id, janus_assert


def test_janus_assert_passes_and_fails_with_its_id():
    @tf.function(autograph=False)
    def checked(x):
        janus_assert(x > 0, 42)
        return x * 2

    assert float(checked(tf.constant(3.0))) == 6.0
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        checked(tf.constant(-1.0))
    assert failed_assumption_id(info.value) == 42


def test_real_errors_are_not_assumption_failures():
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        tf.gather(tf.constant([1, 2]), 5)
    assert failed_assumption_id(info.value) is None
    assert failed_assumption_id(ValueError("JANUS_ASSUMPTION_FAILED:3:")) is None


def test_janus_assert_requires_scalar():
    @tf.function(autograph=False)
    def bad(x):
        janus_assert(x, 1)

    with pytest.raises(ValueError):
        bad.get_concrete_function(tf.TensorSpec([2], tf.bool))


def test_library_cache_is_keyed_by_tf_version_and_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("JANUS_CACHE_DIR", str(tmp_path))
    sources = sorted(build.source_dir().glob("*.cc"))
    path = build._library_path(sources)
    assert path.parent.parent == tmp_path
    assert f"tf{tf.__version__}" in path.parent.name


def test_missing_compiler_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("JANUS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CXX", "")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(build.OpBuildError, match="C\\+\\+17 compiler"):
        build.load()


def test_compile_error_is_reported(tmp_path, monkeypatch):
    bad = tmp_path / "src"
    bad.mkdir()
    (bad / "broken.cc").write_text("this is not C++;\n")
    monkeypatch.setenv("JANUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "source_dir", lambda: bad)
    with pytest.raises(build.OpBuildError, match="could not compile"):
        build.load()


class Node:
    def __init__(self, value, child=None):
        self.value = value
        self.child = child
        self.count = 0


def test_heap_ops_read_write_through_a_store_and_commit_after_success():
    from janus.ops import heap_ops, pyheap

    leaf = Node(tf.constant([1.0, 2.0]))
    root = Node(tf.constant([10.0, 20.0]), leaf)
    tensor = pyheap.expect(pyheap.Expectation("tensor", 1, tf.float32, (2,)))
    obj = pyheap.expect(pyheap.Expectation("object", 2, cls=Node))
    count = pyheap.expect(pyheap.Expectation("int", 3))

    @tf.function(autograph=False)
    def step(store, ptr):
        token = tf.constant(0, tf.int64)
        token, child = heap_ops.get_attr(token, store, ptr, "child", obj, tf.int64, [])
        token, value = heap_ops.get_attr(token, store, child, "value", tensor, tf.float32, [2])
        token = heap_ops.set_attr(token, store, child, "value", value * 3.0, tensor)
        token, again = heap_ops.get_attr(token, store, child, "value", tensor, tf.float32, [2])  # local copy
        token = heap_ops.set_attr(token, store, ptr, "count", tf.constant(7, tf.int64), count)
        return again

    factory = pyheap.StoreFactory()
    out = step(factory.handle(), factory.pointer(root))
    np.testing.assert_allclose(out, [3.0, 6.0])
    np.testing.assert_allclose(leaf.value, [1.0, 2.0])  # nothing written before the commit
    factory.finish(commit=True)
    np.testing.assert_allclose(leaf.value, [3.0, 6.0])
    assert root.count == 7 and type(root.count) is int

    root.child = "not a node"  # the graph was specialised on a Node child: the assumption fails
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        step(factory.handle(), factory.pointer(root))
    factory.finish(commit=False)
    assert failed_assumption_id(info.value) == 2


def test_heap_ops_refuse_pointers_their_store_did_not_hand_out():
    from janus.ops import heap_ops, pyheap

    tensor = pyheap.expect(pyheap.Expectation("tensor", 1, tf.float32, (2,)))

    @tf.function(autograph=False)
    def read(store, ptr):
        return heap_ops.get_attr(tf.constant(0, tf.int64), store, ptr, "value", tensor, tf.float32, [2])[1]

    factory = pyheap.StoreFactory()
    with pytest.raises(tf.errors.InternalError, match="never handed out"):
        read(factory.handle(), tf.constant(12345, tf.int64))
    factory.finish(commit=False)
