"""``python -m benchmarks [--quick]``: runs the benchmarks and writes benchmarks/results/."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from benchmarks import control_flow, core, state, transparent
from benchmarks.harness import write_json
from benchmarks.report import model_rows, update_readme

MODELS = (core.lenet_three_ways, control_flow.lstm_three_ways, state.stateful_lstm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer repeats")
    args = parser.parse_args()
    console = Console()
    models = []
    for bench in MODELS:
        with console.status(f"running {bench.__name__}"):
            models.append(bench(args.quick))
    with console.status("running per-call and profiler overhead"):
        overhead = core.per_call_overhead(args.quick)
        profiler = core.profiler_overhead(args.quick)
    with console.status("running the examples eager / janus.enable() / @janus.jit"):
        examples = transparent.examples(args.quick)
    payload = {"models": models, "overhead": overhead, "profiler": profiler, "examples": examples}
    path = write_json("summary-quick.json" if args.quick else "summary.json", payload)

    table = Table(title="janus benchmarks (medians, interleaved, one process)")
    for col in ("model", "unit", "eager", "janus", "tf.function", "janus ÷ eager", "janus ÷ tf.function"):
        table.add_column(col)
    for row in model_rows(payload):
        table.add_row(*row)
    console.print(table)
    lstm = next(m for m in models if m["name"] == "lstm")
    console.print(
        f"LSTM +UNRL: unrolled janus is {lstm['unrl_effect']:.2f}× janus with tf.while_loop. "
        f"Per call, 3-op function: janus {overhead['janus_us']:.1f} µs, "
        f"tf.function {overhead['tf_function_us']:.1f} µs, eager {overhead['eager_us']:.1f} µs. "
        f"Profiled LeNet step: {profiler['profiled_over_eager']:.2f}× eager."
    )
    console.print(f"written: {path}")
    if not args.quick:
        update_readme(path)
        console.print("README.md benchmark block updated from these results")


if __name__ == "__main__":
    main()
