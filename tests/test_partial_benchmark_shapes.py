"""[partial] Small versions of the two steps of ``benchmarks/partial_steps.py``, run under janus (split,
or for classification also as one graph with the metrics run after it) and compared with eager after
every call (results, printed text and warnings, weights, optimizer state, Python history): a
detection-style step that materialises its predictions with ``.numpy()`` inside the
tape to assign targets in NumPy, and a classification step that computes scikit-learn metrics on
``.numpy()`` predictions inside the tape."""

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential

import janus

keras = tf.keras
CALLS = 16  # the step profiles 3 calls, its segments 3 each, segments split again 3 and 3 more
IMAGE, STRIDE, SIZES, CLASSES = 16, 4, (4.0, 8.0), 3


def served_split(jitted, args: tuple, per_call: int) -> None:
    """The step ran split, no segment tried to build a graph asking the eager tape for gradients,
    and once warm, one more call is served by at least ``per_call`` segment graphs (the forward
    pass and the update among them)."""
    stats, text = janus.stats(jitted), janus.explain(jitted)
    assert stats["split_calls"] > 0, f"the step did not run split: {stats}\n{text}"
    assert stats["imperative_calls"] == 0, stats
    assert "build failed" not in text, text
    jitted(*args)
    served = janus.stats(jitted)["segment_calls"] - stats["segment_calls"]
    assert served >= per_call, f"{served} segment graphs served a call: {stats}\n{janus.explain(jitted)}"


def anchors() -> np.ndarray:
    centers = (np.arange(IMAGE // STRIDE, dtype=np.float32) + 0.5) * STRIDE
    cy, cx = np.meshgrid(centers, centers, indexing="ij")
    cells = np.repeat(np.stack([cx.ravel(), cy.ravel()], 1), len(SIZES), axis=0)
    sizes = np.tile(np.array(SIZES, np.float32), cells.shape[0] // len(SIZES))
    return np.concatenate([cells, np.stack([sizes, sizes], 1)], 1)


ANCHORS = anchors()


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    lo = np.maximum(a[:, None, :2] - a[:, None, 2:] / 2, b[None, :, :2] - b[None, :, 2:] / 2)
    hi = np.minimum(a[:, None, :2] + a[:, None, 2:] / 2, b[None, :, :2] + b[None, :, 2:] / 2)
    inter = np.prod(np.clip(hi - lo, 0.0, None), axis=2)
    return inter / (np.prod(a[:, None, 2:], axis=2) + np.prod(b[None, :, 2:], axis=2) - inter)


def assign(deltas: np.ndarray, gt_boxes: list, gt_classes: list) -> tuple:
    """Each box takes its two best anchors by IoU of the predicted box plus IoU of the anchor."""
    classes = np.zeros(deltas.shape[:2], np.int32)
    targets = np.zeros(deltas.shape, np.float32)
    positive = np.zeros(deltas.shape[:2], np.float32)
    for i, (gt, labels) in enumerate(zip(gt_boxes, gt_classes)):
        predicted = np.concatenate([ANCHORS[:, :2] + deltas[i, :, :2] * ANCHORS[:, 2:], ANCHORS[:, 2:]], 1)
        quality = iou(predicted, gt) + iou(ANCHORS, gt)
        best = quality.argmax(1)
        idx = np.unique(np.argsort(-quality, axis=0)[:2].ravel())
        classes[i, idx] = labels[best[idx]] + 1
        targets[i, idx] = (gt[best[idx]] - ANCHORS[idx]) / ANCHORS[idx, 2:].repeat(2, 1)
        positive[i, idx] = 1.0
    return classes, targets, positive


def detection_calls() -> list[tuple]:
    rng = np.random.default_rng(0)
    calls = []
    for _ in range(CALLS):
        images = tf.constant(rng.random((2, IMAGE, IMAGE, 3), dtype=np.float32))
        boxes = [np.concatenate([rng.uniform(4, 12, (k, 2)), rng.uniform(3, 9, (k, 2))], 1) for k in (1, 3)]
        calls.append((images, boxes, [rng.integers(0, CLASSES, len(b)) for b in boxes]))
    return calls


@pytest.mark.keras
@pytest.mark.parametrize("recompute", [True, False], ids=["recomputed_prefix", "split"])
def test_detection_step_assigning_targets_in_numpy_inside_the_tape(recompute):
    janus.config.recompute_prefix = recompute

    def make():
        keras.utils.set_random_seed(0)
        images = keras.layers.Input((IMAGE, IMAGE, 3))
        h = keras.layers.Conv2D(8, 3, strides=STRIDE, padding="same", activation="relu")(images)
        n = (IMAGE // STRIDE) ** 2 * len(SIZES)
        deltas = keras.layers.Reshape((n, 4))(keras.layers.Conv2D(len(SIZES) * 4, 1)(h))
        logits = keras.layers.Reshape((n, CLASSES + 1))(keras.layers.Conv2D(len(SIZES) * (CLASSES + 1), 1)(h))
        model = keras.Model(images, [deltas, logits])
        opt = keras.optimizers.Adam(1e-2)

        def train_step(images, gt_boxes, gt_classes):
            with tf.GradientTape() as tape:
                deltas, logits = model(images, training=True)
                classes, targets, positive = assign(deltas.numpy(), gt_boxes, gt_classes)
                cls_loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(classes, logits))
                err = tf.abs(deltas - targets)
                smooth_l1 = tf.reduce_sum(tf.where(err < 1.0, 0.5 * err**2, err - 0.5), axis=-1)
                box_loss = tf.reduce_sum(positive * smooth_l1) / max(1.0, positive.sum())
                loss = cls_loss + box_loss
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return train_step, lambda: [v.numpy() for v in [*model.trainable_variables, *opt.variables]]

    calls = detection_calls()
    jitted = run_differential(make, calls, min_graph_calls=0)
    if not recompute:
        served_split(jitted, calls[0], 3)  # forward, class and box losses, update
        return
    text = janus.explain(jitted)  # predict, assign in NumPy, then one graph: forward, losses, update
    assert "runs with a recomputed prefix" in text, text
    version = jitted.split
    assert version.prefix.stats.graph_calls >= CALLS - 3, text
    assert version.segments[0].jit.stats.graph_calls >= CALLS - 6 and version.segments[0].jit.split is None, text


@pytest.mark.keras
@pytest.mark.parametrize("later", [True, False], ids=["metrics_after_the_graph", "split"])
def test_classification_step_with_scikit_learn_metrics_inside_the_tape(later):
    janus.config.later_statements = later
    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    from sklearn.metrics import accuracy_score, f1_score

    digits = sklearn_datasets.load_digits()
    x, y = (digits.data[: 16 * CALLS] / 16.0).astype(np.float32), digits.target[: 16 * CALLS].astype(np.int32)
    calls = [(tf.constant(x[i * 16 : (i + 1) * 16]), tf.constant(y[i * 16 : (i + 1) * 16])) for i in range(CALLS)]

    def make():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.layers.Input((64,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(10)])  # fmt: skip
        opt = keras.optimizers.SGD(0.1, momentum=0.9)
        history = []

        def train_step(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                predicted = tf.argmax(logits, axis=1).numpy()
                labels = y.numpy()
                history.append(
                    {"accuracy": accuracy_score(labels, predicted), "f1": f1_score(labels, predicted, average="macro")}
                )
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return train_step, lambda: [history, *(v.numpy() for v in [*model.trainable_variables, *opt.variables])]

    jitted = run_differential(make, calls, min_graph_calls=0)
    if not later:
        served_split(jitted, calls[0], 2)  # forward and update (and the loss, unless it stays Python)
        return
    stats, text = janus.stats(jitted), janus.explain(jitted)  # one graph, the metrics run after it
    assert stats["graph_calls"] >= CALLS - 3 and stats["split_calls"] == 0, text
    assert text.count("runs in Python after the graph") == 3, text
