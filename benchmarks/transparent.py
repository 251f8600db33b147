"""[enable] benchmark: each example run eager, under janus.enable() and with @janus.jit.

The three modes cannot share a process (enable() hooks the interpreter), so each example
runs as a subprocess per mode; the modes alternate across repeats and medians are reported.
Throughput is that of each run's second half, after profiling and graph builds.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MODES = {"eager": [], "enable": ["--janus"], "jit": ["--jit"]}


def _throughput(name: str, flags: list[str], steps: int) -> float:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, f"{name}.py", "--steps", str(steps), *flags], cwd=EXAMPLES, env=env,
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    return float(re.search(r"([\d.]+) examples/s in the second half", out).group(1))


def examples(quick: bool = False) -> dict:
    rows = []
    steps, repeats = (30, 1) if quick else (400, 3)
    for name in ("mnist_cnn", "rnn_lm", "subclassed_model", "recurrent_cell_enable"):
        samples: dict[str, list[float]] = {m: [] for m in MODES}
        for r in range(repeats):
            order = list(MODES)[r % 3 :] + list(MODES)[: r % 3]
            for mode in order:
                samples[mode].append(_throughput(name, MODES[mode], steps))
        med = {m: statistics.median(v) for m, v in samples.items()}
        rows.append({"example": name, "steps": steps, "examples_per_s": med,
                     "enable_over_eager": med["enable"] / med["eager"],
                     "enable_over_jit": med["enable"] / med["jit"]})  # fmt: skip
    return {"name": "enable_examples", "rows": rows}
