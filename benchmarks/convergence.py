"""[convergence] LeNet trained on scikit-learn's digits eagerly, under ``janus.jit`` and under naive ``tf.function``.

The paper shows that janus reaches the same accuracy as eager execution, only sooner in
wall-clock time. Here the three runs start from one seed and train on identical batches:

* **Data.** ``sklearn.datasets.load_digits`` (1,797 grey 8×8 images, shipped with
  scikit-learn, no download), scaled to [0, 1] and **upsampled to 28×28** with bilinear
  ``tf.image.resize`` in the data preparation, so the unchanged MNIST LeNet of
  ``benchmarks.models.lenet`` (and its ``imperative_step``) is trained. A stratified 80/20
  split (1,437 training, 360 test images); batches of 50 from a fresh seeded shuffle every
  epoch (the remainder is dropped), prepared before any clock starts.
* **Training.** ``lenet.imperative_step`` with SGD (learning rate ``LEARNING_RATE``), run as
  written (eager), wrapped in ``janus.jit`` and wrapped in ``tf.function``. The three runs
  are interleaved step by step so machine-load changes hit them alike.
* **Agreement.** Graphs reassociate float arithmetic, so janus and ``tf.function`` match eager
  to ~1e-7 per step, and the difference grows over hundreds of SGD steps (recorded per mode,
  with the first-20-steps difference separately); the curves stay on top of each other.
* **Clocks.** Each run's wall clock sums only its own training steps, *including* janus's
  profiling and graph building and ``tf.function``'s tracing; each step is synchronised
  (its loss fetched). Evaluation (test loss and accuracy, an eager forward pass over the
  test set every ``eval_every`` steps) is outside the clocks.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow as tf

import janus
from benchmarks.harness import write_json
from benchmarks.models import lenet

MODES = ("eager", "janus", "tf_function")
LEARNING_RATE = 0.1
TEST_FRACTION = 0.2
TARGET_ACCURACY = 0.95  # time-to-accuracy is read off the evaluation points


def digits(seed: int = 0) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """``(x_train, y_train, x_test, y_test)``: 28×28×1 float32 images in [0, 1], int32 labels."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    images = (data.images / 16.0).astype(np.float32)[..., None]  # (1797, 8, 8, 1)
    x_train, x_test, y_train, y_test = train_test_split(
        images, data.target.astype(np.int32), test_size=TEST_FRACTION, stratify=data.target, random_state=seed
    )

    def upsample(x: np.ndarray) -> tf.Tensor:
        return tf.clip_by_value(tf.image.resize(x, (28, 28), method="bilinear"), 0.0, 1.0)

    return upsample(x_train), tf.constant(y_train), upsample(x_test), tf.constant(y_test)


def training_batches(x: tf.Tensor, y: tf.Tensor, steps: int, seed: int) -> list[tuple[tf.Tensor, tf.Tensor]]:
    """``steps`` batches of ``lenet.BATCH``, reshuffled each epoch, remainder dropped."""
    rng = np.random.default_rng(seed)
    per_epoch = int(x.shape[0]) // lenet.BATCH
    out: list[tuple[tf.Tensor, tf.Tensor]] = []
    while len(out) < steps:
        order = rng.permutation(int(x.shape[0]))
        for b in range(per_epoch):
            if len(out) == steps:
                break
            idx = tf.constant(order[b * lenet.BATCH : (b + 1) * lenet.BATCH])
            out.append((tf.gather(x, idx), tf.gather(y, idx)))
    return out


def _evaluate(model, x_test: tf.Tensor, y_test: tf.Tensor) -> tuple[float, float]:
    logits = model(x_test, training=False)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y_test, logits=logits))
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32), y_test), tf.float32))
    return float(loss), float(accuracy)


def convergence(quick: bool = False, seed: int = 0) -> dict:
    """Trains the three ways; returns per-step losses/clocks and the test curves of each mode."""
    steps, eval_every = (90, 15) if quick else (360, 20)
    x_train, y_train, x_test, y_test = digits(seed)
    data = training_batches(x_train, y_train, steps, seed)

    runs = {}
    for mode in MODES:
        model, _ = lenet.build_model(seed)  # same seed: identical initial weights for the three modes
        opt = lenet.keras.optimizers.SGD(LEARNING_RATE)
        step = lenet.imperative_step(model, opt)
        if mode == "janus":
            step = janus.jit(step)
        elif mode == "tf_function":
            step = tf.function(step)
        runs[mode] = {"model": model, "step": step, "clock": 0.0, "losses": [], "seconds": []}
        runs[mode]["curve"] = {"step": [0], "seconds": [0.0], **dict(zip(("test_loss", "test_accuracy"), map(
            lambda v: [v], _evaluate(model, x_test, y_test))))}  # fmt: skip

    for i, (x, y) in enumerate(data, start=1):
        for mode in MODES[(i - 1) % len(MODES) :] + MODES[: (i - 1) % len(MODES)]:  # rotate who goes first
            run = runs[mode]
            started = time.perf_counter()
            loss = float(run["step"](x, y))  # fetching the loss synchronises the step
            run["clock"] += time.perf_counter() - started
            run["losses"].append(loss)
            run["seconds"].append(run["clock"])
        if i % eval_every == 0 or i == steps:
            for run in runs.values():
                test_loss, accuracy = _evaluate(run["model"], x_test, y_test)
                run["curve"]["step"].append(i)
                run["curve"]["seconds"].append(run["clock"])
                run["curve"]["test_loss"].append(test_loss)
                run["curve"]["test_accuracy"].append(accuracy)

    eager_losses = np.asarray(runs["eager"]["losses"])
    eager_weights = [v.numpy() for v in runs["eager"]["model"].trainable_variables]
    modes = {}
    for mode, run in runs.items():
        weights = [v.numpy() for v in run["model"].trainable_variables]
        modes[mode] = {
            "train_loss": run["losses"],
            "train_seconds": run["seconds"],
            "eval": run["curve"],
            "final_test_accuracy": run["curve"]["test_accuracy"][-1],
            "final_test_loss": run["curve"]["test_loss"][-1],
            "total_train_seconds": run["clock"],
            f"seconds_to_{TARGET_ACCURACY:g}_test_accuracy": next(
                (t for t, a in zip(run["curve"]["seconds"], run["curve"]["test_accuracy"]) if a >= TARGET_ACCURACY),
                None,
            ),
            "max_abs_loss_difference_from_eager": float(np.max(np.abs(np.asarray(run["losses"]) - eager_losses))),
            "max_abs_loss_difference_from_eager_first_20_steps": float(
                np.max(np.abs(np.asarray(run["losses"][:20]) - eager_losses[:20]))
            ),
            "max_abs_weight_difference_from_eager": max(
                float(np.max(np.abs(w - e))) for w, e in zip(weights, eager_weights)
            ),
        }
    jitted = runs["janus"]["step"]
    stats = janus.stats(jitted)
    assert stats["graph_calls"] > 0, janus.explain(jitted)
    modes["janus"]["stats"] = stats
    return {
        "name": "convergence",
        "model": "lenet",
        "dataset": "sklearn load_digits, 8x8 upsampled to 28x28 (bilinear tf.image.resize)",
        "train_images": int(x_train.shape[0]),
        "test_images": int(x_test.shape[0]),
        "batch": lenet.BATCH,
        "optimizer": f"SGD({LEARNING_RATE})",
        "steps": steps,
        "eval_every": eval_every,
        "seed": seed,
        "quick": quick,
        "clock": "training steps only, including janus profiling/graph building and tf.function tracing",
        "modes": modes,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="90 steps instead of 360")
    args = parser.parse_args(argv)
    result = convergence(quick=args.quick)
    path = write_json("convergence-quick.json" if args.quick else "convergence.json", result)
    for mode, r in result["modes"].items():
        reached = r[f"seconds_to_{TARGET_ACCURACY:g}_test_accuracy"]
        print(
            f"{mode:12s} test accuracy {r['final_test_accuracy']:.3f}  train {r['total_train_seconds']:.1f} s  "
            f"{TARGET_ACCURACY:g} reached after {'never' if reached is None else f'{reached:.1f} s'}  "
            f"max |loss - eager| {r['max_abs_loss_difference_from_eager']:.2g}"
        )
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
