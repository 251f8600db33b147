"""Interleaved, warmed-up, median-of-repeats timing of several variants of one workload.

Absolute times on small shared machines are noisy; the ratios between variants measured
side by side in one process are what the reports use.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import tensorflow as tf

RESULTS = Path(__file__).parent / "results"


@dataclasses.dataclass
class Measurement:
    name: str
    unit: str
    per_step: dict[str, float]  # median seconds per step, by variant
    samples: dict[str, list[float]]
    items_per_step: float = 1.0
    notes: dict = dataclasses.field(default_factory=dict)
    # Median seconds of a repeat's first, untimed step (``measure``'s ``rewarm``), by variant.
    cold_step: dict[str, float] = dataclasses.field(default_factory=dict)

    def throughput(self, variant: str) -> float:
        return self.items_per_step / self.per_step[variant]

    def ratio(self, a: str, b: str) -> float:
        """How many times faster ``a`` is than ``b``."""
        return self.per_step[b] / self.per_step[a]

    def paired_ratio(self, a: str, b: str) -> float:
        """How many times faster ``a`` is than ``b``: the median over repeats of the two's ratio within
        the repeat, where they ran one after the other, so that the machine's speed drifting between
        repeats cancels (a model's eager speed moved 1.5x between two runs an hour apart)."""
        return statistics.median(tb / ta for ta, tb in zip(self.samples[a], self.samples[b]))

    def pooled_with(self, other: Measurement) -> Measurement:
        """This measurement's samples followed by ``other``'s (of the same workload), medians anew.

        Each sample is seconds a step, so samples timed with different ``steps`` a repeat pool. Both
        measurements time the variants they share in the same repeats, so ``paired_ratio`` still
        compares steps that ran one after the other."""
        samples = {k: [*v, *other.samples.get(k, [])] for k, v in self.samples.items()}
        return Measurement(
            self.name, self.unit, {k: statistics.median(v) for k, v in samples.items()}, samples,
            self.items_per_step, dict(self.notes), dict(self.cold_step),
        )  # fmt: skip


def measure(
    name: str,
    variants: dict[str, Callable[[], object]],
    *,
    unit: str,
    items_per_step: float = 1.0,
    warmup: int = 5,
    repeats: int = 7,
    steps: int = 10,
    rewarm: int = 0,
    min_seconds: float = 0.0,
    max_repeats: int = 25,
    sync: Callable[[object], object] | None = None,
) -> Measurement:
    """Times ``steps`` calls of each variant per repeat, in :func:`balanced_orders`.

    ``rewarm`` untimed calls precede each repeat's timed ones. The first step after another
    variant's steps runs cold on these machines: a TreeRNN training step under janus took 45 ms
    after an eager step (median), 90-110 ms after a second of sleep, against a median of 22.8 ms back to
    back, and a 64 MB NumPy sum 8-12 ms after a second of sleep against 4-6 ms. A training loop runs its steps
    back to back, so the timed steps follow a warm one; the cold step's cost is reported apart.

    ``min_seconds``: more repeats (up to ``max_repeats``) where ``repeats`` would time less than this,
    estimated from each variant's last warm-up step. Short steps otherwise give a median of few,
    short samples: AN's 13-18 ms steps, timed 3 a repeat and 7 repeats, moved its ratio by about 7%
    between processes.
    """
    sync = sync or _sync
    last: dict[str, float] = {}
    for key, fn in variants.items():
        for _ in range(warmup):
            start = time.perf_counter()
            sync(fn())
            last[key] = time.perf_counter() - start
    repeat_seconds = steps * sum(last.values())
    if min_seconds > 0 and repeat_seconds > 0:
        repeats = max(repeats, min(max_repeats, math.ceil(min_seconds / repeat_seconds)))
    samples: dict[str, list[float]] = {k: [] for k in variants}
    cold: dict[str, list[float]] = {k: [] for k in variants}
    orders = balanced_orders(list(variants))
    for r in range(repeats):
        for key in orders[r % len(orders)]:
            fn = variants[key]
            for i in range(rewarm):
                start = time.perf_counter()
                sync(fn())
                if i == 0:
                    cold[key].append(time.perf_counter() - start)
            start = time.perf_counter()
            out = None
            for _ in range(steps):
                out = fn()
            sync(out)
            samples[key].append((time.perf_counter() - start) / steps)
    per_step = {k: statistics.median(v) for k, v in samples.items()}
    cold_step = {k: statistics.median(v) for k, v in cold.items() if v}
    return Measurement(name, unit, per_step, samples, items_per_step, cold_step=cold_step)


def balanced_orders(keys: list[str]) -> list[list[str]]:
    """The orders of the repeats, one after another: each variant runs after each other one equally often.

    A variant's first step can be slower after some others (LM's step after an eager step measured
    3-4% slower than after a graph step). With plain rotation of three variants janus followed eager
    in 5 of 7 repeats and the baseline followed janus in 5, which biased their ratio by about 2%.
    Here the repeats, run back to back, pass each ordered pair of different variants once per
    ``len(keys) - 1`` repeats (two variants: alternate; three: ``ABC ACB``), found by a small search;
    past four variants, rotations each followed by its reverse.
    """
    n = len(keys)
    if n <= 2:
        return [keys]
    if n <= 4:
        found = _pair_once_blocks(keys, n - 1, [], set())
        if found is not None:
            return found
    rotations = [keys[r:] + keys[:r] for r in range(n)]
    return [order for rotation in rotations for order in (rotation, rotation[::-1])]


def _pair_once_blocks(keys: list[str], count: int, blocks: list, used: set) -> list[list[str]] | None:
    """``count`` permutations of ``keys`` whose cyclic concatenation holds each ordered pair at most once."""
    if len(blocks) == count:
        closing = (blocks[-1][-1], blocks[0][0])
        return [list(b) for b in blocks] if closing[0] != closing[1] and closing not in used else None
    first = [keys] if not blocks else itertools.permutations(keys)
    for block in first:
        previous = blocks[-1][-1] if blocks else None
        pairs = ([(previous, block[0])] if previous is not None else []) + list(zip(block, block[1:]))
        if any(a == b or (a, b) in used for a, b in pairs) or len(set(pairs)) < len(pairs):
            continue
        found = _pair_once_blocks(keys, count, [*blocks, list(block)], used | set(pairs))
        if found is not None:
            return found
    return None


def _sync(out: object) -> object:
    for value in tf.nest.flatten(out):
        if isinstance(value, tf.Tensor):
            value.numpy()
    return out


def machine() -> str:
    return (
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, TensorFlow {tf.__version__}"
    )


def write_json(filename: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {
        "machine": machine(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        **payload,
    }
    path = RESULTS / filename
    path.write_text(json.dumps(payload, indent=2, default=float) + "\n")
    return path
