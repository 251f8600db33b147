"""``python -m benchmarks [--quick]``: runs the benchmarks and writes benchmarks/results/."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from benchmarks import core
from benchmarks.harness import write_json
from benchmarks.report import update_readme


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer repeats")
    args = parser.parse_args()
    console = Console()
    results = []
    for bench in (core.lenet_three_ways, core.per_call_overhead, core.profiler_overhead):
        with console.status(f"running {bench.__name__}"):
            results.append(bench(args.quick))
    path = write_json("core-quick.json" if args.quick else "core.json", {"results": results})

    lenet, overhead, profiler = results
    table = Table(title="janus \\[core] benchmarks (medians, interleaved, one process)")
    for col in ("benchmark", "imperative", "janus", "tf.function", "janus ÷ eager", "janus ÷ tf.function"):
        table.add_column(col)
    table.add_row(
        "LeNet (images/s)",
        f"{lenet['imperative']:.0f}",
        f"{lenet['janus']:.0f}",
        f"{lenet['symbolic']:.0f}",
        f"{lenet['janus_over_imperative']:.2f}×",
        f"{lenet['janus_over_symbolic']:.3f}×",
    )
    table.add_row(
        "3-op call (µs/call)",
        f"{overhead['eager_us']:.1f}",
        f"{overhead['janus_us']:.1f}",
        f"{overhead['tf_function_us']:.1f}",
        f"{overhead['eager_us'] / overhead['janus_us']:.2f}×",
        f"{overhead['janus_over_tf_function']:.2f}×",
    )
    console.print(table)
    console.print(
        f"one eager op: {overhead['eager_one_op_us']:.1f} µs; profiled LeNet step: "
        f"{profiler['profiled_over_eager']:.2f}× plain eager "
        f"({profiler['profiled_ms']:.1f} vs {profiler['eager_ms']:.1f} ms)"
    )
    console.print(f"written: {path}")
    if not args.quick:
        update_readme(path)
        console.print("README.md benchmark block updated from these results")


if __name__ == "__main__":
    main()
