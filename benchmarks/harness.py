"""Interleaved, warmed-up, median-of-repeats timing of several variants of one workload.

Absolute times on small shared machines are noisy; the ratios between variants measured
side by side in one process are what the reports use.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
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

    def throughput(self, variant: str) -> float:
        return self.items_per_step / self.per_step[variant]

    def ratio(self, a: str, b: str) -> float:
        """How many times faster ``a`` is than ``b``."""
        return self.per_step[b] / self.per_step[a]


def measure(
    name: str,
    variants: dict[str, Callable[[], object]],
    *,
    unit: str,
    items_per_step: float = 1.0,
    warmup: int = 5,
    repeats: int = 7,
    steps: int = 10,
    sync: Callable[[object], object] | None = None,
) -> Measurement:
    """Times ``steps`` calls of each variant per repeat, rotating the order every repeat."""
    sync = sync or _sync
    for fn in variants.values():
        for _ in range(warmup):
            sync(fn())
    samples: dict[str, list[float]] = {k: [] for k in variants}
    order = list(variants)
    for r in range(repeats):
        for key in order[r % len(order) :] + order[: r % len(order)]:
            fn = variants[key]
            start = time.perf_counter()
            out = None
            for _ in range(steps):
                out = fn()
            sync(out)
            samples[key].append((time.perf_counter() - start) / steps)
    per_step = {k: statistics.median(v) for k, v in samples.items()}
    return Measurement(name, unit, per_step, samples, items_per_step)


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
