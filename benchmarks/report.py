"""Renders measured results (benchmarks/results/*.json) into the README's benchmark block."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- BENCHMARKS:BEGIN -->", "<!-- BENCHMARKS:END -->"


def core_markdown(payload: dict) -> str:
    lenet, overhead, profiler = payload["results"]
    return "\n".join(
        [
            f"Measured by `make bench` on {payload['date']} ({payload['machine']}).",
            "",
            "| benchmark | eager | janus | tf.function | janus ÷ eager | janus ÷ tf.function |",
            "|---|---|---|---|---|---|",
            f"| LeNet, batch 50 (images/s) | {lenet['imperative']:.0f} | {lenet['janus']:.0f} | "
            f"{lenet['symbolic']:.0f} | {lenet['janus_over_imperative']:.2f}× | {lenet['janus_over_symbolic']:.3f}× |",
            f"| 3-op scalar function (µs/call) | {overhead['eager_us']:.1f} | {overhead['janus_us']:.1f} | "
            f"{overhead['tf_function_us']:.1f} | {overhead['eager_us'] / overhead['janus_us']:.2f}× | "
            f"{overhead['janus_over_tf_function']:.2f}× |",
            "",
            f"One eager op costs {overhead['eager_one_op_us']:.1f} µs on the same machine. A profiled LeNet step "
            f"costs {profiler['profiled_over_eager']:.2f}× a plain eager step ({profiler['profiled_ms']:.1f} ms vs "
            f"{profiler['eager_ms']:.1f} ms). Only the first `profile_calls` calls pay this.",
        ]
    )


def update_readme(results_file: Path = ROOT / "benchmarks" / "results" / "core.json") -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    block = f"{BEGIN}\n{core_markdown(json.loads(results_file.read_text()))}\n{END}"
    readme.write_text(re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S))


if __name__ == "__main__":
    update_readme()
