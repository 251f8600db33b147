"""[breaker] Issue #18's two user-facing features as users would hold them: ``janus.export`` given a
callable object, a Keras model, ``*args``, and a function whose assumption is checked after it updated
a variable; and transparent mode's watchers beside ``threading.settrace`` and when ``enable()`` is
called in another thread."""

import sys
import threading
import warnings

import pytest
import tensorflow as tf
from differential import assert_same

import janus


def warm(fn, *args, calls=5):
    for _ in range(calls):
        fn(*args)
    assert janus.stats(fn)["graph_calls"] > 0


# ------------------------------------------------------------------ janus.export
class Scale(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable([2.0, 3.0])

    @janus.jit
    def __call__(self, x):
        return x * self.w


def test_export_of_a_module_whose_call_is_jitted_serves_eager_results(tmp_path):
    """``janus.export(module, x)`` with ``@janus.jit`` on ``__call__`` raised AttributeError (no
    ``__qualname__``): janus.jit wrapped the object itself, not its jitted ``__call__``."""
    Scale.__call__.reset()
    module = Scale()
    for _ in range(5):
        module(tf.ones([2]))
    assert janus.stats(Scale.__call__)["graph_calls"] > 0
    janus.export(module, tf.ones([2]), path=tmp_path / "scale")
    loaded = tf.saved_model.load(str(tmp_path / "scale"))
    x = tf.constant([1.0, -4.0])
    assert_same(Scale.__call__.fn(module, x), loaded.serve(x))


@pytest.mark.keras
def test_export_of_a_keras_model_object_says_to_export_a_function_that_calls_it(tmp_path):
    """It said "janus runs Layer.__call__ without a whole graph ...: library code is never converted"."""
    keras = tf.keras
    model = keras.Sequential([keras.layers.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(janus.ExportError, match=r"not the Keras Sequential object: export a function that calls"):
        janus.export(model, tf.ones([4, 3]), path=tmp_path / "model")
    assert not (tmp_path / "model").exists()


@janus.jit
def add_all(*xs):
    return tf.add_n(list(xs))


def test_a_star_args_function_is_served_with_its_tensors_as_positional_arguments(tmp_path):
    """``loaded.serve(a, b)`` raised TypeError (too many positional arguments): serve took *xs as one tuple."""
    a, b = tf.constant([1.0, 2.0]), tf.constant([10.0, 20.0])
    warm(add_all, a, b)
    janus.export(add_all, a, b, path=tmp_path / "add")
    loaded = tf.saved_model.load(str(tmp_path / "add"))
    c, d = tf.constant([3.0, -1.0]), tf.constant([0.5, 0.25])
    assert_same(add_all.fn(c, d), loaded.serve(c, d))
    assert_same(add_all.fn(c, d), loaded.signatures["serving_default"](xs_0=c, xs_1=d)["output_0"])


total = tf.Variable(0.0)


@janus.jit
def accumulate_then_branch(x):
    total.assign_add(tf.reduce_sum(x))
    if total > -100.0:  # reads the update: janus's assertion on it runs after it
        return x * 2.0
    return x


def test_an_assumption_checked_after_a_variable_update_is_refused_and_speculate_false_exports_it(tmp_path):
    """The loaded model raised "this call breaks an assumption" with ``total``'s update applied (the
    README says before any variable is updated; janus itself puts it back and re-runs eagerly)."""
    total.assign(0.0)
    warm(accumulate_then_branch, tf.ones([2]))
    with pytest.raises(janus.ExportError, match=r"checked after it updated variables \(Variable"):
        janus.export(accumulate_then_branch, tf.ones([2]), path=tmp_path / "speculated")
    assert not (tmp_path / "speculated").exists()

    janus.export(accumulate_then_branch, tf.ones([2]), path=tmp_path / "general", speculate=False)
    loaded = tf.saved_model.load(str(tmp_path / "general"))
    (saved,) = loaded.janus_variables
    eager_total = tf.Variable(total.read_value())
    for x in (tf.constant([1.0, 2.0]), tf.constant([-500.0, 0.0]), tf.constant([3.0, 1.0])):
        total.assign(eager_total)
        expected = accumulate_then_branch.fn(x)
        eager_total.assign(total)
        assert_same(expected, loaded.serve(x))
        assert_same(eager_total.read_value(), saved.read_value(), "the loaded variable")


# ------------------------------------------------------------------ transparent mode's watchers
def step(w, x):
    with tf.GradientTape() as tape:
        tape.watch(w)
        loss = tf.reduce_sum(tf.tanh(x * w))
    return loss, tape.gradient(loss, w)


W, X = tf.constant([0.5, -0.5, 2.0]), tf.constant([1.0, 2.0, 3.0])


@pytest.fixture
def transparent_mode_off():
    yield
    janus.disable()


def test_a_threading_settrace_function_is_put_back_after_disable(transparent_mode_off):
    """On 3.11 ``disable()`` left ``threading.gettrace()`` None: a debugger's function for new threads
    was dropped for good, without the warning that a ``sys.settrace`` function gets."""

    def tracer(frame, event, arg):
        return None

    original = step.__code__
    threading.settrace(tracer)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            janus.enable()
        expected = [step(W, X) for _ in range(6)]
        janus.disable()
        assert threading.gettrace() is tracer
        if sys.version_info < (3, 12):
            assert any("replaces the trace function already set" in str(w.message) for w in caught)
        assert step.__code__ is original
        assert_same(expected[0], step(W, X))
    finally:
        threading.settrace(None)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="sys.monitoring watches every thread")
def test_enable_in_another_thread_warns_that_running_threads_are_not_watched(transparent_mode_off):
    """On 3.11 ``enable()`` from a setup thread watched only that thread and threads started later:
    the main thread's training step was never routed, and nothing said so."""
    caught = []

    def setup():
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            janus.enable()
        caught.extend(seen)

    thread = threading.Thread(target=setup, name="setup")
    thread.start()
    thread.join()
    assert any("called in thread 'setup'" in str(w.message) for w in caught)


def test_results_under_enable_in_a_worker_thread_equal_eager(transparent_mode_off):
    expected = [step(W, X * float(i)) for i in range(8)]
    janus.enable()
    got = []
    worker = threading.Thread(target=lambda: got.extend(step(W, X * float(i)) for i in range(8)))
    worker.start()
    worker.join()
    assert_same(expected, got)
    routed = {r.function.__name__: r for r in janus.transparent.routed_functions()}
    assert routed["step"].jitted.stats.graph_calls > 0
