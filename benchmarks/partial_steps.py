"""[partial] Training steps that call ``.numpy()`` in the middle (issue #17): eager, janus, hand split.

Two steps as TF2 users write them, each with a statement no graph can hold inside its
``tf.GradientTape`` block (janus runs detection with a recomputed prefix, ``janus/partial/recompute.py``,
and classification as one graph with the metric statements run after it, ``janus/graphgen/later.py``):

* ``detection``: a small conv backbone with box and class heads (batch 8, 64×64 synthetic images
  with 1-4 boxes each, 192 anchors on an 8×8 grid), trained with Adam. In the middle of the tape
  the predicted box deltas are materialised with ``.numpy()`` and each ground-truth box gets its
  best anchors in NumPy, by the IoU of the *predicted* box plus that of the anchor (a
  prediction-aware assignment, as SimOTA-style detectors do). The class and box losses are then
  computed from those targets, under the same tape.
* ``classification``: an MLP on scikit-learn's digits (batch 64, SGD with momentum). Inside the
  tape the logits' argmax is materialised with ``.numpy()`` and scikit-learn's accuracy and macro
  F1 are appended to a Python history list; loss, gradients and the update as usual.

Variants, timed interleaved in one process (``benchmarks.harness.measure``), medians:

* ``eager``: the step as written;
* ``janus``: ``@janus.jit`` on the same, unchanged step;
* ``hand_*``: the splits a TF expert writes by hand: ``tf.function`` for the graph parts,
  Python for the NumPy or scikit-learn part. The faster of them is the reference.
  ``hand_tape`` keeps the eager tape across the Python part, as janus does: a forward
  ``tf.function``, the NumPy or scikit-learn statements, a loss ``tf.function``, the eager
  ``tape.gradient`` and an update ``tf.function``. Classification also has ``hand``: one
  ``tf.function`` does the whole update and returns the predictions, and the metrics are computed
  after it ("graph before, Python after": the metrics feed nothing the update computes).
  Detection's targets feed the loss, so its other split is ``hand_recompute``: predict in one
  ``tf.function`` without a tape, assign in NumPy, then forward, loss, gradients and update in a
  second (the forward runs twice, the backward is one graph).

Before timing, every variant trains ``CHECK_STEPS`` steps from one seed on the same batches,
side by side: janus must give eager's losses, weights and Python history (``RTOL``), and the hand
splits must compute the same. That phase holds janus's profiling and segment building; its time
per variant is reported as ``first_calls_seconds``. ``janus.stats(step)`` must count split calls
and segment calls. Target (issue #17): janus ≥ 0.9× the best hand split, and faster than eager.

``python -m benchmarks.partial_steps [--quick]``.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable

import numpy as np
import tensorflow as tf

import janus
from benchmarks.harness import machine, measure, write_json

keras = tf.keras
RTOL, ATOL = 1e-5, 1e-6  # tests/differential.py's tolerances
CHECK_STEPS = 20  # janus profiles 3 calls, then each segment its own 3, a segment split again 3 more
TARGET_OVER_HAND = 0.9

# ------------------------------------------------------------------------------------ detection
IMAGE, STRIDE, CLASSES = 64, 8, 4
GRID = IMAGE // STRIDE
ANCHOR_SIZES = (12.0, 24.0, 40.0)
DETECTION_BATCH = 8
TOP_K = 4  # anchors each ground-truth box may take
MIN_QUALITY = 0.2


def anchor_boxes() -> np.ndarray:
    """``(GRID * GRID * len(ANCHOR_SIZES), 4)`` anchors as ``(cx, cy, w, h)``, in the order of the
    heads' outputs reshaped to ``(batch, anchors, ...)``: cells row by row, then sizes."""
    centers = (np.arange(GRID, dtype=np.float32) + 0.5) * STRIDE
    cy, cx = np.meshgrid(centers, centers, indexing="ij")
    cells = np.repeat(np.stack([cx.ravel(), cy.ravel()], 1), len(ANCHOR_SIZES), axis=0)
    sizes = np.tile(np.array(ANCHOR_SIZES, np.float32), GRID * GRID)
    return np.concatenate([cells, np.stack([sizes, sizes], 1)], 1)


ANCHORS = anchor_boxes()


def decode(deltas: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    xy = anchors[:, :2] + deltas[:, :2] * anchors[:, 2:]
    wh = anchors[:, 2:] * np.exp(np.clip(deltas[:, 2:], -4.0, 4.0))
    return np.concatenate([xy, wh], 1)


def encode(boxes: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    xy = (boxes[:, :2] - anchors[:, :2]) / anchors[:, 2:]
    return np.concatenate([xy, np.log(boxes[:, 2:] / anchors[:, 2:])], 1).astype(np.float32)


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(len(a), len(b))`` intersections over unions of ``(cx, cy, w, h)`` boxes."""
    a_lo, a_hi = a[:, None, :2] - a[:, None, 2:] / 2, a[:, None, :2] + a[:, None, 2:] / 2
    b_lo, b_hi = b[None, :, :2] - b[None, :, 2:] / 2, b[None, :, :2] + b[None, :, 2:] / 2
    inter = np.prod(np.clip(np.minimum(a_hi, b_hi) - np.maximum(a_lo, b_lo), 0.0, None), axis=2)
    union = np.prod(a[:, None, 2:], axis=2) + np.prod(b[None, :, 2:], axis=2) - inter
    return inter / union


def assign_targets(deltas: np.ndarray, gt_boxes: list, gt_classes: list) -> tuple[np.ndarray, ...]:
    """Per image: each ground-truth box takes its ``TOP_K`` anchors by IoU of the predicted box
    plus IoU of the anchor; an anchor taken twice goes to the box it fits best. Returns class
    targets (0 is background), encoded box targets and the positives' mask."""
    batch, n = deltas.shape[:2]
    classes = np.zeros((batch, n), np.int32)
    boxes = np.zeros((batch, n, 4), np.float32)
    positive = np.zeros((batch, n), np.float32)
    for i in range(batch):
        gt, labels = gt_boxes[i], gt_classes[i]
        quality = iou(decode(deltas[i], ANCHORS), gt) + iou(ANCHORS, gt)
        best = quality.argmax(1)
        chosen = np.zeros(n, bool)
        chosen[np.argsort(-quality, axis=0)[:TOP_K].ravel()] = True
        idx = np.flatnonzero(chosen & (quality[np.arange(n), best] > MIN_QUALITY))
        classes[i, idx] = labels[best[idx]] + 1
        boxes[i, idx] = encode(gt[best[idx]], ANCHORS[idx])
        positive[i, idx] = 1.0
    return classes, boxes, positive


def build_detector(seed: int = 0):
    keras.utils.set_random_seed(seed)
    images = keras.layers.Input((IMAGE, IMAGE, 3))
    h = images
    for filters, stride in ((16, 2), (32, 2), (64, 2), (64, 1)):
        h = keras.layers.Conv2D(filters, 3, strides=stride, padding="same", activation="relu")(h)
    a = len(ANCHOR_SIZES)
    deltas = keras.layers.Reshape((GRID * GRID * a, 4))(keras.layers.Conv2D(a * 4, 1)(h))
    logits = keras.layers.Reshape((GRID * GRID * a, CLASSES + 1))(keras.layers.Conv2D(a * (CLASSES + 1), 1)(h))
    return keras.Model(images, [deltas, logits]), keras.optimizers.Adam(1e-3)


def detection_batches(n: int, seed: int = 0) -> list[tuple[tf.Tensor, list, list]]:
    """``(images, boxes, classes)``: noise with 1-4 filled boxes per image, one colour per class;
    boxes as ``(k, 4)`` float32 arrays of ``(cx, cy, w, h)``, classes as ``(k,)`` int arrays."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        images = rng.random((DETECTION_BATCH, IMAGE, IMAGE, 3), dtype=np.float32) * 0.2
        boxes, classes = [], []
        for image in images:
            k = int(rng.integers(1, 5))
            wh = rng.uniform(8, 40, (k, 2))
            xy = rng.uniform(wh / 2, IMAGE - wh / 2)
            labels = rng.integers(0, CLASSES, k)
            for (cx, cy), (w, h), label in zip(xy, wh, labels):
                image[int(cy - h / 2) : int(cy + h / 2), int(cx - w / 2) : int(cx + w / 2), label % 3] += (
                    0.5 + label / 8
                )
            boxes.append(np.concatenate([xy, wh], 1).astype(np.float32))
            classes.append(labels)
        out.append((tf.constant(images), boxes, classes))
    return out


def detection_step(model, opt) -> Callable:
    """The step as users write it: the tape spans the NumPy target assignment."""

    def train_step(images, gt_boxes, gt_classes):
        with tf.GradientTape() as tape:
            deltas, logits = model(images, training=True)
            classes, boxes, positive = assign_targets(deltas.numpy(), gt_boxes, gt_classes)
            cls_loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(classes, logits))
            err = tf.abs(deltas - boxes)
            smooth_l1 = tf.reduce_sum(tf.where(err < 1.0, 0.5 * err**2, err - 0.5), axis=-1)
            box_loss = tf.reduce_sum(positive * smooth_l1) / max(1.0, positive.sum())
            loss = cls_loss + box_loss
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return train_step


def _detection_loss(deltas, logits, classes, boxes, positive):
    cls_loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(classes, logits))
    err = tf.abs(deltas - boxes)
    smooth_l1 = tf.reduce_sum(tf.where(err < 1.0, 0.5 * err**2, err - 0.5), axis=-1)
    return cls_loss + tf.reduce_sum(positive * smooth_l1) / tf.maximum(1.0, tf.reduce_sum(positive))


def _detection_targets_spec() -> list[tf.TensorSpec]:
    n = GRID * GRID * len(ANCHOR_SIZES)
    b = DETECTION_BATCH
    return [tf.TensorSpec([b, n], tf.int32), tf.TensorSpec([b, n, 4]), tf.TensorSpec([b, n])]


def detection_hand_tape(model, opt) -> Callable:
    """A TF expert's split keeping the eager tape: forward graph, NumPy, loss graph, apply graph."""
    variables = model.trainable_variables
    image_spec = tf.TensorSpec([DETECTION_BATCH, IMAGE, IMAGE, 3])
    n = GRID * GRID * len(ANCHOR_SIZES)
    preds = [tf.TensorSpec([DETECTION_BATCH, n, 4]), tf.TensorSpec([DETECTION_BATCH, n, CLASSES + 1])]
    forward = tf.function(lambda images: model(images, training=True), input_signature=[image_spec])
    loss_fn = tf.function(_detection_loss, input_signature=preds + _detection_targets_spec())
    apply = tf.function(lambda grads: opt.apply_gradients(zip(grads, variables)))

    def step(images, gt_boxes, gt_classes):
        with tf.GradientTape() as tape:
            deltas, logits = forward(images)
            targets = assign_targets(deltas.numpy(), gt_boxes, gt_classes)
            loss = loss_fn(deltas, logits, *targets)
        apply(tape.gradient(loss, variables))
        return loss

    return step


def detection_hand_recompute(model, opt) -> Callable:
    """A TF expert's split with one training graph: predict (no tape), NumPy, then forward, loss,
    gradients and update in one ``tf.function`` (the forward runs twice)."""
    variables = model.trainable_variables
    image_spec = tf.TensorSpec([DETECTION_BATCH, IMAGE, IMAGE, 3])

    @tf.function(input_signature=[image_spec])
    def predict(images):
        return model(images, training=True)[0]

    @tf.function(input_signature=[image_spec, *_detection_targets_spec()])
    def train(images, classes, boxes, positive):
        with tf.GradientTape() as tape:
            deltas, logits = model(images, training=True)
            loss = _detection_loss(deltas, logits, classes, boxes, positive)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    def step(images, gt_boxes, gt_classes):
        targets = assign_targets(predict(images).numpy(), gt_boxes, gt_classes)
        return train(images, *targets)

    return step


# ------------------------------------------------------------------------------------ classification
CLASSIFICATION_BATCH = 64


def digits_batches(n: int, seed: int = 0) -> list[tuple[tf.Tensor, tf.Tensor]]:
    """``n`` batches of scikit-learn's digits (64 pixels in [0, 1], int32 labels), reshuffled each epoch."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x, y = (data.data / 16.0).astype(np.float32), data.target.astype(np.int32)
    rng = np.random.default_rng(seed)
    per_epoch = len(x) // CLASSIFICATION_BATCH
    out = []
    while len(out) < n:
        order = rng.permutation(len(x))
        for b in range(min(per_epoch, n - len(out))):
            idx = order[b * CLASSIFICATION_BATCH : (b + 1) * CLASSIFICATION_BATCH]
            out.append((tf.constant(x[idx]), tf.constant(y[idx])))
    return out


def build_classifier(seed: int = 0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.layers.Input((64,)),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    return model, keras.optimizers.SGD(0.05, momentum=0.9)


def classification_step(model, opt, history: list) -> Callable:
    """The step as users write it: scikit-learn metrics on ``.numpy()`` predictions inside the tape."""
    from sklearn.metrics import accuracy_score, f1_score

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

    return train_step


def classification_hand_split(model, opt, history: list) -> Callable:
    """A TF expert's split: the whole update in one ``tf.function`` that also returns the
    predictions, the scikit-learn metrics after it in Python."""
    from sklearn.metrics import accuracy_score, f1_score

    specs = [tf.TensorSpec([CLASSIFICATION_BATCH, 64]), tf.TensorSpec([CLASSIFICATION_BATCH], tf.int32)]

    @tf.function(input_signature=specs)
    def update(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss, tf.argmax(logits, axis=1)

    def step(x, y):
        loss, predicted = update(x, y)
        predicted, labels = predicted.numpy(), y.numpy()
        history.append(
            {"accuracy": accuracy_score(labels, predicted), "f1": f1_score(labels, predicted, average="macro")}
        )
        return loss

    return step


def classification_hand_tape(model, opt, history: list) -> Callable:
    """A TF expert's split keeping the eager tape, as janus's split does: forward graph, the
    metrics in Python, loss graph, eager gradient, update graph."""
    from sklearn.metrics import accuracy_score, f1_score

    x_spec = tf.TensorSpec([CLASSIFICATION_BATCH, 64])
    y_spec = tf.TensorSpec([CLASSIFICATION_BATCH], tf.int32)
    forward = tf.function(lambda x: model(x, training=True), input_signature=[x_spec])
    loss_fn = tf.function(
        lambda y, logits: tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)),
        input_signature=[y_spec, tf.TensorSpec([CLASSIFICATION_BATCH, 10])],
    )
    apply = tf.function(lambda grads: opt.apply_gradients(zip(grads, model.trainable_variables)))

    def step(x, y):
        with tf.GradientTape() as tape:
            logits = forward(x)
            predicted, labels = tf.argmax(logits, axis=1).numpy(), y.numpy()
            history.append(
                {"accuracy": accuracy_score(labels, predicted), "f1": f1_score(labels, predicted, average="macro")}
            )
            loss = loss_fn(y, logits)
        apply(tape.gradient(loss, model.trainable_variables))
        return loss

    return step


# ------------------------------------------------------------------------------------ the runs
def _same(expected: object, actual: object, where: str) -> None:
    if expected is None:
        assert actual is None, f"{where}: {actual!r} is not None"
    elif isinstance(expected, dict):
        assert list(expected) == list(actual), f"{where}: keys {list(actual)} != {list(expected)}"
        for k in expected:
            _same(expected[k], actual[k], f"{where}[{k!r}]")
    elif isinstance(expected, (list, tuple)):
        assert len(expected) == len(actual), f"{where}: length {len(actual)} != {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            _same(e, a, f"{where}[{i}]")
    else:
        np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=RTOL, atol=ATOL, err_msg=where)


def _check_and_warm(programs: dict, batches: list, history: Callable[[str], object]) -> dict:
    """Trains every variant ``CHECK_STEPS`` steps side by side on the same batches (rotating who
    goes first); every variant must give eager's losses, and at the end eager's weights and
    ``history(variant)``. Returns each variant's seconds over these first calls."""
    names = list(programs)
    seconds = dict.fromkeys(names, 0.0)
    losses: dict[str, list[float]] = {k: [] for k in names}
    for i in range(CHECK_STEPS):
        args = batches[i % len(batches)]
        for name in names[i % len(names) :] + names[: i % len(names)]:
            started = time.perf_counter()
            loss = float(programs[name]["step"](*args))
            seconds[name] += time.perf_counter() - started
            losses[name].append(loss)
    for name in names[1:]:
        _same(losses["eager"], losses[name], f"{name}: losses")
        weights = [v.numpy() for v in programs[name]["model"].trainable_variables]
        _same([v.numpy() for v in programs["eager"]["model"].trainable_variables], weights, f"{name}: weights")
        _same(history("eager"), history(name), f"{name}: Python history")
    return seconds


def _segments(jitted) -> dict:
    """How janus serves the step, from ``janus.stats``: split (segment calls) or one graph with the
    statements run after it (graph calls); graphs must serve calls either way."""
    stats = janus.stats(jitted)
    split = stats["split_calls"] > 0 and stats["segment_calls"] > 0
    assert split or stats["graph_calls"] > 0, janus.explain(jitted)
    return stats


def _run(name: str, programs: dict, batches: list, history: Callable[[str], object], quick: bool) -> dict:
    first = _check_and_warm(programs, batches, history)
    jitted = programs["janus"]["step"]
    before = _segments(jitted)
    cycles = {k: itertools.cycle(batches) for k in programs}
    variants = {k: (lambda k=k: programs[k]["step"](*next(cycles[k]))) for k in programs}
    m = measure(name, variants, unit="ms/step", warmup=3, repeats=5 if quick else 11, steps=5 if quick else 20)
    after = _segments(jitted)
    text = janus.explain(jitted)
    calls = after["calls"] - before["calls"]
    hands = [k for k in programs if k.startswith("hand")]
    best_hand = min(hands, key=lambda k: m.per_step[k])
    return {
        "name": name,
        "ms_per_step": {k: v * 1e3 for k, v in m.per_step.items()},
        "janus_over_eager": m.ratio("janus", "eager"),
        "janus_over_best_hand": m.ratio("janus", best_hand),
        "best_hand": best_hand,
        **{f"janus_over_{k}": m.ratio("janus", k) for k in hands},
        "first_calls_seconds": {"steps": CHECK_STEPS, **first},
        "segment_calls_per_step": (after["segment_calls"] - before["segment_calls"]) / calls,
        "graph_calls_per_step": (after["graph_calls"] - before["graph_calls"]) / calls,
        "statements_run_later": text.count("runs in Python after the graph"),
        "segments_too_small": text.count("[too small]"),  # run as Python after the segment cost check
        "janus_stats": after,
        "explain": text,
    }


def detection(quick: bool = False) -> dict:
    batches = detection_batches(4 if quick else 8)
    makers = {
        "eager": detection_step,
        "janus": lambda m, o: janus.jit(detection_step(m, o)),
        "hand_tape": detection_hand_tape,
        "hand_recompute": detection_hand_recompute,
    }
    programs = {}
    for variant, make in makers.items():
        model, opt = build_detector(0)
        programs[variant] = {"model": model, "step": make(model, opt)}
    result = _run("detection", programs, batches, lambda _: None, quick)
    return {**result, "batch": DETECTION_BATCH, "image": IMAGE, "anchors": len(ANCHORS)}


def classification(quick: bool = False) -> dict:
    batches = digits_batches(28)  # one epoch of digits
    makers = {
        "eager": classification_step,
        "janus": classification_step,
        "hand": classification_hand_split,
        "hand_tape": classification_hand_tape,
    }
    programs, histories = {}, {}
    for variant, make in makers.items():
        model, opt = build_classifier(0)
        histories[variant] = []
        step = make(model, opt, histories[variant])
        programs[variant] = {"model": model, "step": janus.jit(step) if variant == "janus" else step}
    result = _run("classification", programs, batches, lambda v: histories[v][:CHECK_STEPS], quick)
    return {**result, "batch": CLASSIFICATION_BATCH}


def partial_steps(quick: bool = False) -> dict:
    return {
        "name": "partial_steps",
        "machine": machine(),
        "target": f"janus >= {TARGET_OVER_HAND}x the best hand split and > eager",
        "steps": [detection(quick), classification(quick)],
    }


def summary(result: dict) -> str:
    """Per step: ms a step by variant, janus against eager and the best hand split, segment use."""
    lines = []
    for r in result["steps"]:
        ms = "  ".join(f"{k} {v:.2f}" for k, v in r["ms_per_step"].items())
        met = r["janus_over_best_hand"] >= TARGET_OVER_HAND and r["janus_over_eager"] > 1.0
        s = r["janus_stats"]
        first = ", ".join(f"{k} {v:.2f}" for k, v in r["first_calls_seconds"].items() if k != "steps")
        lines += [
            f"{r['name']}: ms/step {ms}",
            f"  janus ÷ eager {r['janus_over_eager']:.2f}×, janus ÷ {r['best_hand']} {r['janus_over_best_hand']:.2f}× "
            f"(target {'met' if met else 'missed'}); graph_calls {s['graph_calls']} "
            f"({r['graph_calls_per_step']:.1f} a step), statements run after the graph "
            f"{r['statements_run_later']}; split_calls {s['split_calls']}, segment_calls "
            f"{s['segment_calls']} ({r['segment_calls_per_step']:.1f} a step); segments too small "
            f"{r['segments_too_small']}; first {CHECK_STEPS} calls (s): {first}",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (the smoke run)")
    args = parser.parse_args()
    result = partial_steps(args.quick)
    print(summary(result))
    for r in result["steps"]:
        print(r["explain"])
    print(f"wrote {write_json('partial_steps-quick.json' if args.quick else 'partial_steps.json', result)}")


if __name__ == "__main__":
    main()
