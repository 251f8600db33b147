"""Breaking the recomputed prefix (``janus.partial.recompute``) and NumPy reductions of fed arrays
(``janus.graphgen.numpy_values``) with users' code shapes: differential against eager after every
call, and how janus served the calls."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import janus
from janus.partial import recompute
from tests.differential import assert_same_call, outcome, run_differential

keras = tf.keras


def _recomputed(jitted) -> bool:
    version = getattr(jitted, "jit_function", jitted).split  # a method's BoundJit
    return version is not None and hasattr(version, "prefix") and version.prefix.stats.graph_calls > 0


def _xs(n: int, shape=(4, 2), seed: int = 0) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [(tf.constant(rng.normal(size=shape).astype(np.float32)),) for _ in range(n)]


# ------------------------------------------------------------------ what the statement reaches
class _Annealer:
    def __init__(self) -> None:
        self.w = tf.Variable([[0.5], [-0.3]])
        self.temperature = 1.0

    def soft_targets(self, preds: np.ndarray) -> np.ndarray:
        self.temperature *= 0.5  # annealed by the statement: the prefix read the old value
        return np.tanh(preds) * 0.5

    def step(self, x):
        with tf.GradientTape() as tape:
            y = (x @ self.w) / self.temperature
            targets = self.soft_targets(y.numpy())
            loss = tf.reduce_sum((y - targets) ** 2)
        self.w.assign_sub(0.01 * tape.gradient(loss, self.w))
        return loss


def test_a_method_statement_changing_an_attribute_the_prefix_read():
    def make():
        trainer = _Annealer()
        return trainer.step, lambda: (trainer.w.numpy(), trainer.temperature)

    jitted = run_differential(make, _xs(8), min_graph_calls=0)
    assert not _recomputed(jitted), janus.explain(jitted)


def test_a_statement_appending_to_an_argument_list_the_prefix_reads():
    def make2():
        w = tf.Variable([0.5, 0.25])
        history = [1.0]

        def record(values: np.ndarray, seen: list) -> np.ndarray:
            seen[0] = seen[0] % 3 + 1.0  # in place: the prefix read the old value
            return values * 0.5

        def step(x, seen):
            with tf.GradientTape() as tape:
                y = w * x * seen[0]
                target = record(y.numpy(), seen)
                loss = tf.reduce_sum((y - target) ** 2)
            w.assign_sub(0.01 * tape.gradient(loss, w))
            return loss

        return step, history, lambda: (w.numpy(), list(history))

    eager, eh, es = make2()
    raw, jh, js = make2()
    jitted = janus.jit(raw)
    for n, (x,) in enumerate(_xs(8)):
        assert_same_call(n, outcome(eager, (x, eh)), outcome(jitted, (x, jh)), es, js)
    assert not _recomputed(jitted), janus.explain(jitted)


def test_a_statement_changing_an_argument_array_in_place():
    def make2():
        w = tf.Variable([0.5, 0.25])
        scale = np.ones(2, np.float32)

        def step(x, s):
            with tf.GradientTape() as tape:
                y = w * x + s  # (a product would keep s for the gradient: TF may alias the array)
                target = np.multiply(np.sign(y.numpy()), 2.0, out=s)  # the statement writes into s
                loss = tf.reduce_sum((y - target) ** 2)
            w.assign_sub(0.01 * tape.gradient(loss, w))
            return loss

        return step, scale, lambda: (w.numpy(), scale.copy())

    eager, eh, es = make2()
    raw, jh, js = make2()
    jitted = janus.jit(raw)
    for n, (x,) in enumerate(_xs(8, shape=(2,))):
        assert_same_call(n, outcome(eager, (x, eh)), outcome(jitted, (x, jh)), es, js)
    assert not _recomputed(jitted), janus.explain(jitted)


# ------------------------------------------------------------------ tensors through the statement
def test_a_statement_returning_a_tensor_of_a_watched_argument(monkeypatch):
    monkeypatch.setattr(recompute, "MAX_LINKED_CALLS", 100)  # linked on every call

    def make():
        w = tf.Variable([[0.5, -0.2], [0.3, 0.8]])

        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                h = tf.tanh(x @ w)
                scaled = x * float(np.abs(h.numpy()).max())  # through x, not the prefix's locals
                loss = tf.reduce_sum(scaled * h)
            gx, gw = tape.gradient(loss, [x, w])
            w.assign_sub(0.1 * gw)
            return loss, gx

        return step, lambda: w.numpy()

    jitted = run_differential(make, _xs(8, shape=(3, 2)), min_graph_calls=0)
    assert _recomputed(jitted) and jitted.split.prefix.stats.imperative_calls > 0, janus.explain(jitted)


def test_an_outer_tape_around_the_call():
    def make():
        w = tf.Variable([[0.5], [-0.3]])

        def step(x):
            with tf.GradientTape() as tape:
                y = x @ w
                target = np.tanh(y.numpy())
                loss = tf.reduce_sum((y - target) ** 2)
            return loss, tape.gradient(loss, w)

        return step, lambda: w.numpy()

    eager, _ = make()
    raw, _ = make()
    jitted = janus.jit(raw)
    for (x,) in _xs(8):
        with tf.GradientTape() as outer:
            outer.watch(x)
            le, _ = eager(x)
        ge = outer.gradient(le, x)
        with tf.GradientTape() as outer:
            outer.watch(x)
            lj, _ = jitted(x)
        gj = outer.gradient(lj, x)
        np.testing.assert_allclose(lj.numpy(), le.numpy(), rtol=1e-5)
        assert (ge is None) == (gj is None), (ge, gj)
        if ge is not None:
            np.testing.assert_allclose(gj.numpy(), ge.numpy(), rtol=1e-5)


def test_persistent_tape_two_gradients():
    def make():
        w = tf.Variable([[0.5], [-0.3]])
        b = tf.Variable([0.1])

        def step(x):
            with tf.GradientTape(persistent=True) as tape:
                y = x @ w + b
                target = np.where(y.numpy() > 0, 1.0, 0.0).astype(np.float32)
                loss = tf.reduce_sum((y - target) ** 2)
                reg = tf.reduce_sum(w * w)
            gw = tape.gradient(loss, w)
            gb = tape.gradient(reg + loss, b)
            w.assign_sub(0.1 * gw)
            b.assign_sub(0.1 * gb)
            return loss

        return step, lambda: (w.numpy(), b.numpy())

    jitted = run_differential(make, _xs(8), min_graph_calls=0)
    assert _recomputed(jitted), janus.explain(jitted)


class _Assigner:
    """A target assigner passed to the step, counting its calls in a variable the prefix reads."""

    def __init__(self, counter: tf.Variable) -> None:
        self.counter = counter

    def __call__(self, preds: np.ndarray) -> np.ndarray:
        self.counter.assign_add(1.0)
        return np.tanh(preds)


def test_an_argument_the_prefix_does_not_read_reaching_a_variable_it_reads():
    def make2():
        w = tf.Variable([[0.5], [-0.3]])
        counter = tf.Variable(1.0)

        def step(x, assigner):
            with tf.GradientTape() as tape:
                y = x @ w * counter
                target = assigner(y.numpy())
                loss = tf.reduce_sum((y - target) ** 2)
            w.assign_sub(0.01 * tape.gradient(loss, w))
            return loss

        return step, _Assigner(counter), lambda: (w.numpy(), counter.numpy())

    eager, ea, es = make2()
    raw, ja, js = make2()
    jitted = janus.jit(raw)
    for n, (x,) in enumerate(_xs(8)):
        assert_same_call(n, outcome(eager, (x, ea)), outcome(jitted, (x, ja)), es, js)
    assert not _recomputed(jitted), janus.explain(jitted)


# ------------------------------------------------------------------ NumPy scalars of fed arrays
def _scalar_calls(arrays: list[np.ndarray], x: tf.Tensor | None = None) -> list[tuple]:
    x = tf.constant([1.0, 2.0]) if x is None else x
    return [(x, a) for a in arrays]


def test_the_dtype_of_a_sum_is_numpys():
    def make():
        def f(x, mask):
            total = mask.sum()
            print(f"sum of {total.dtype}")  # 'float32', not TF's "<dtype: 'float32'>"
            return x * total

        return f, lambda: None

    jitted = run_differential(make, _scalar_calls([np.array([1.0, 0.5], np.float32)] * 6))
    assert janus.stats(jitted)["graph_calls"] > 0


def test_janus_own_attributes_of_a_sum_are_not_the_users():
    def make():
        def f(x, mask):
            total = mask.sum()
            return x * total.tensor  # AttributeError in eager

        return f, lambda: None

    run_differential(make, _scalar_calls([np.array([1.0, 0.5], np.float32)] * 6), min_graph_calls=0)


@pytest.mark.parametrize("number", [1e39, 2**130, -1e300])
def test_a_python_number_overflowing_the_sums_dtype_warns_as_numpy(number):
    def make():
        def f(x, mask):
            return x * (mask.sum() * number), x * max(mask.sum(), number)

        return f, lambda: None

    run_differential(make, _scalar_calls([np.array([1.0, 0.5], np.float32)] * 6), min_graph_calls=0)


_NUMBERS = st.one_of(
    st.integers(-(2**140), 2**140),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 0.0, -0.0, 0.1, 1e39, 3.4028235e38, 2**24 + 1]),
)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    dtype=st.sampled_from([np.float32, np.float64]),
    op=st.sampled_from("+-*/"),
    number=_NUMBERS,
    reflected=st.booleans(),
    reduction=st.sampled_from(["sum", "mean"]),
    data=st.lists(st.sampled_from([0.0, 1.0, -2.5, 1e38, -1e38, 3e-39, np.inf, np.nan]), min_size=0, max_size=4),
)
def test_nep50_arithmetic_of_a_reduction(dtype, op, number, reflected, reduction, data):
    def make():
        def f(x, values):
            scalar = values.sum() if reduction == "sum" else values.mean()
            a, b = (number, scalar) if reflected else (scalar, number)
            if op == "+":
                scalar = a + b
            elif op == "-":
                scalar = a - b
            elif op == "*":
                scalar = a * b
            else:
                scalar = a / b
            return tf.cast(x, values.dtype) * scalar, tf.cast(x, values.dtype) * max(1.0, values.sum())

        return f, lambda: None

    clean = np.array([1.0, 0.5, 2.0, 0.25][: max(len(data), 1)], dtype)
    arrays = [clean] * 5 + [np.array(data, dtype), clean]
    jitted = run_differential(make, _scalar_calls(arrays), min_graph_calls=0)
    _SERVED.append(janus.stats(jitted)["graph_calls"])


_SERVED: list[int] = []


def test_nep50_arithmetic_examples_were_served_by_graphs():
    """Runs after the property (file order): most of its examples got a graph."""
    assert sum(n > 0 for n in _SERVED) >= len(_SERVED) // 2, _SERVED


# ------------------------------------------------------------------ second-order gradients
def test_a_gradient_penalty_through_a_statement_returning_a_tensor(monkeypatch):
    """Nested tapes: the outer tape differentiates the inner gradient, second order through the
    statement's tensor, which a first-order link to the recomputed prefix would miss: it splits."""
    monkeypatch.setattr(recompute, "MAX_LINKED_CALLS", 100)  # linked on every call, were it recomputed

    def make():
        w = tf.Variable([[0.5, -0.2], [0.3, 0.8]])

        def step(x):
            with tf.GradientTape() as outer:
                with tf.GradientTape() as inner:
                    h = tf.tanh(x @ w)
                    s = h * h * float(np.abs(h.numpy()).max())  # a tensor, through h
                    loss = tf.reduce_sum(s)
                g = inner.gradient(loss, w)
                penalty = tf.reduce_sum(g * g)
            w.assign_sub(0.1 * outer.gradient(penalty, w))
            return loss, penalty

        return step, lambda: w.numpy()

    jitted = run_differential(make, _xs(8, shape=(3, 2)), min_graph_calls=0)
    assert not _recomputed(jitted) and janus.stats(jitted)["segment_calls"] > 0, janus.explain(jitted)


# ------------------------------------------------------------------ Keras models
def _keras_step(layers, training: bool):
    def make():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.layers.Input((5,)), keras.layers.Dense(8), *layers(), keras.layers.Dense(3)])
        opt = keras.optimizers.SGD(0.05)

        def step(x, labels):
            with tf.GradientTape() as tape:
                logits = model(x, training=training)
                probabilities = tf.nn.softmax(logits).numpy()
                targets = np.eye(3, dtype=np.float32)[labels] * 0.9 + 0.1 * probabilities
                loss = tf.reduce_mean(tf.square(tf.nn.softmax(logits) - targets))
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        return step, lambda: [v.numpy() for v in [*model.variables, *opt.variables]]

    return make


def _labelled(n: int, batch: int = 6) -> list[tuple]:
    rng = np.random.default_rng(4)
    return [(tf.constant(rng.normal(size=(batch, 5)).astype(np.float32)), rng.integers(0, 3, batch)) for _ in range(n)]


@pytest.mark.keras
def test_keras_inference_mode_prefix_is_recomputed():
    """``model(x, training=False)`` with Dropout and BatchNormalization reads state only."""
    layers = lambda: [keras.layers.BatchNormalization(), keras.layers.Dropout(0.5)]  # noqa: E731
    jitted = run_differential(_keras_step(layers, False), _labelled(9), min_graph_calls=0)
    assert _recomputed(jitted), janus.explain(jitted)


@pytest.mark.keras
@pytest.mark.skipif(tf.keras.__name__.startswith("tf_keras"), reason="Keras 2's Dropout draws from TF's global "
                    "random state: two models' eager runs differ already")  # fmt: skip
def test_keras_dropout_in_training_is_not_recomputed():
    """Dropout's random draws (its seed generator's state): computed twice, they would differ."""
    layers = lambda: [keras.layers.Dropout(0.5)]  # noqa: E731
    jitted = run_differential(_keras_step(layers, True), _labelled(9), min_graph_calls=0)
    assert not _recomputed(jitted), janus.explain(jitted)


# ------------------------------------------------------------------ subnormal numbers
def _scaled_sum(x, values):
    return x * (values.sum() * 1e30)


def _scaled_product(x, values):
    return x * (values.sum() * 1e-10 * 1e30)


@pytest.mark.parametrize(
    ("fn", "values"),
    [(_scaled_sum, np.array([3e-39, 0.0], np.float32)), (_scaled_product, np.array([1e-30, 0.0], np.float32))],
)
def test_subnormal_numbers_are_numpys_not_flushed_to_zero(fn, values):
    """NumPy computes with subnormal numbers where TF's kernels flush them to zero; the values are
    far below the differential tolerance, so compared relatively here."""
    x = tf.constant([1.0, 2.0])
    jitted = janus.jit(fn)
    for _ in range(6):
        np.testing.assert_allclose(jitted(x, values).numpy(), fn(x, values).numpy(), rtol=1e-6, atol=0)
    assert janus.stats(jitted)["graphs_built"] > 0, janus.explain(jitted)  # its JanusAssert sent these calls to eager


def test_a_python_number_overflowing_a_tensors_dtype_does_not_warn_when_the_graph_is_built():
    """Eager converts ``1e39`` to float32 silently (inf); TF's graph conversion goes through NumPy,
    which warns 'overflow encountered in cast': a warning eager never gives."""

    def make():
        def f(x):
            return x * 1e39, tf.add(x, -1e39)

        return f, lambda: None

    run_differential(make, [(tf.constant([1.0, 2.0]),)] * 6, min_graph_calls=2)


# ------------------------------------------------------------------ a property over statement shapes
def _statement(kind: str, h: tf.Tensor, fail: bool) -> object:
    """What a target assignment returns, by ``kind``; raises where asked (as a bad batch would)."""
    values = h.numpy()
    if fail:
        raise ValueError(f"no positive among {len(values)}")
    targets = np.tanh(values) * 0.5
    if kind == "array":
        return targets
    if kind == "tensor":
        return h * float(np.abs(values).max())  # gradients through h
    if kind == "count":
        return int((values > 0).sum()) + 1
    return {"targets": targets, "weight": float(np.abs(values).mean())}


def _use(kind: str, h: tf.Tensor, out: object) -> tf.Tensor:
    if kind in ("array", "tensor"):
        return tf.reduce_sum((h - out) ** 2)
    if kind == "count":
        return tf.reduce_sum(h * h) / out
    return tf.reduce_sum((h - out["targets"]) ** 2) * out["weight"]


_RECOMPUTED: list[bool] = []


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    kind=st.sampled_from(["array", "tensor", "count", "dict"]),
    calls=st.lists(st.tuples(st.sampled_from([3, 4]), st.booleans(), st.booleans()), min_size=6, max_size=10),
)
def test_statement_shapes_against_eager(kind, calls):
    def make():
        w = tf.Variable([[0.5, -0.2], [0.3, 0.8]])
        seen: list = []

        def step(x, flag, fail):
            with tf.GradientTape() as tape:
                h = tf.tanh(x @ w)
                if flag:
                    h = h * 2.0
                out = _statement(kind, h, fail)
                loss = _use(kind, h, out)
            w.assign_sub(0.1 * tape.gradient(loss, w))
            seen.append(kind)
            return loss

        return step, lambda: (w.numpy(), len(seen))

    rng = np.random.default_rng(len(calls))
    profile = [(4, False, False)] * 4  # a warm start: the recomputed prefix serves what follows
    arguments = [
        (tf.constant(rng.normal(size=(n, 2)).astype(np.float32)), flag, fail and i % 3 == 2)
        for i, (n, flag, fail) in enumerate(profile + calls)
    ]
    jitted = run_differential(make, arguments, min_graph_calls=0)
    _RECOMPUTED.append(_recomputed(jitted))


def test_statement_shapes_were_recomputed():
    """Runs after the property (file order): the recomputed prefix served some of its examples."""
    assert any(_RECOMPUTED), _RECOMPUTED
