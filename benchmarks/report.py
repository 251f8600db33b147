"""Renders measured results (benchmarks/results/summary.json) into the README's benchmark block."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- BENCHMARKS:BEGIN -->", "<!-- BENCHMARKS:END -->"
LABELS = {
    "lenet": "LeNet, batch 50",
    "lstm": "LSTM (PTB-shaped), batch 20 × 20 steps, state passed in and out",
    "lstm_state": "the same LSTM keeping `(h, c)` in `self.state` (paper's Fig. 1); baseline passes state explicitly",
}


def model_rows(payload: dict) -> list[list[str]]:
    rows = []
    for m in payload["models"]:
        rows.append(
            [
                LABELS.get(m["name"], m["name"]),
                m["unit"],
                f"{m['imperative']:.0f}",
                f"{m['janus']:.0f}",
                f"{m['symbolic']:.0f}",
                f"{m['janus_over_imperative']:.2f}×",
                f"{m['janus_over_symbolic']:.3f}×",
            ]
        )
    o = payload["overhead"]
    rows.append(
        [
            "3-op scalar function",
            "µs/call",
            f"{o['eager_us']:.1f}",
            f"{o['janus_us']:.1f}",
            f"{o['tf_function_us']:.1f}",
            f"{o['eager_us'] / o['janus_us']:.2f}×",
            f"{o['janus_over_tf_function']:.2f}×",
        ]
    )
    return rows


def markdown(payload: dict) -> str:
    lines = [
        f"Measured by `make bench` on {payload['date']} ({payload['machine']}).",
        "",
        "| model | unit | eager | janus | tf.function | janus ÷ eager | janus ÷ tf.function |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in model_rows(payload)]
    o, p = payload["overhead"], payload["profiler"]
    extra = [
        "",
        f"One eager op costs {o['eager_one_op_us']:.1f} µs on the same machine. A profiled LeNet step costs "
        f"{p['profiled_over_eager']:.2f}× a plain eager step ({p['profiled_ms']:.1f} ms vs {p['eager_ms']:.1f} ms); "
        "only the first `profile_calls` calls pay this.",
    ]
    lstm = next((m for m in payload["models"] if m["name"] == "lstm"), None)
    if lstm:
        extra.append(
            f"LSTM ablation (+UNRL): janus with the time loop unrolled runs {lstm['unrl_effect']:.2f}× as fast as "
            f"janus with it as a `tf.while_loop` (`janus.config.unroll_loops = False`: "
            f"{lstm['janus_loop_op']:.0f} words/s)."
        )
    if "examples" in payload:
        extra += [
            "",
            "Transparent mode on the examples (throughput over the second half of "
            f"{payload['examples']['rows'][0]['steps']}-step runs, after profiling and graph builds; "
            "median of subprocess runs):",
            "",
            "| example | eager (examples/s) | `janus.enable()` | `@janus.jit` | enable ÷ eager | enable ÷ jit |",
            "|---|---|---|---|---|---|",
        ]
        for row in payload["examples"]["rows"]:
            rate = row["examples_per_s"]
            extra.append(
                f"| {row['example']} | {rate['eager']:.0f} | {rate['enable']:.0f} | {rate['jit']:.0f} | "
                f"{row['enable_over_eager']:.2f}× | {row['enable_over_jit']:.2f}× |"
            )
    return "\n".join(lines + extra)


def horovod_markdown(payload: dict) -> str:
    lines = [
        "",
        "Horovod scale factor, 2-process throughput ÷ (1-process throughput × 2), measured by "
        "`python -m benchmarks.horovod_scale` (gloo, one 2-core machine: one process already uses both cores, "
        "so this shows core sharing, not network overlap):",
        "",
        "| model | mode | 1 process | 2 processes (total) | scale factor |",
        "|---|---|---|---|---|",
    ]
    names = {"janus": "janus (plain tape)", "eager": "eager + DistributedGradientTape",
             "tf_function": "tf.function + DistributedGradientTape"}  # fmt: skip
    for row in payload["rows"]:
        lines.append(
            f"| {row['model']} | {names[row['mode']]} | {row['one_process']:.0f} {row['unit']} | "
            f"{row['two_processes_total']:.0f} {row['unit']} | {row['scale_factor']:.2f} |"
        )
    return "\n".join(lines)


def update_readme(results_file: Path = ROOT / "benchmarks" / "results" / "summary.json") -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    body = markdown(json.loads(results_file.read_text()))
    horovod = results_file.parent / "horovod.json"
    if horovod.exists():
        body += "\n" + horovod_markdown(json.loads(horovod.read_text()))
    block = f"{BEGIN}\n{body}\n{END}"
    readme.write_text(re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S))


if __name__ == "__main__":
    update_readme()
