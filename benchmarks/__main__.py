"""``python -m benchmarks [--quick]``: runs the benchmarks and writes benchmarks/results/."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from benchmarks import (
    ablation,
    control_flow,
    convergence,
    core,
    partial_steps,
    plots,
    recurrent_cell,
    recursion_overhead,
    state,
    table3,
    transparent,
)
from benchmarks.harness import write_json
from benchmarks.report import model_rows, table3_markdown, update_readme

MODELS = (core.lenet_three_ways, control_flow.lstm_three_ways, state.stateful_lstm)
ABLATION_MODELS = ("lstm", "treernn")  # the paper's Fig. 9: loops (UNRL), recursion (PARL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke run: small models, fewer repeats (CI)")
    args = parser.parse_args()
    console = Console()
    rows = []
    with Progress(console=console) as progress:
        task = progress.add_task("Table 3 models", total=len(table3.NAMES))
        for name in table3.NAMES:  # each: agreement four ways (raises if janus disagrees), then throughput
            progress.update(task, description=f"Table 3: {name}")
            try:
                rows.append(table3.run_model(name, args.quick))
            except AssertionError as err:  # janus disagreed with eager
                if args.quick:
                    raise  # the CI smoke run fails
                console.print(f"{name}: {err}", style="red", markup=False)
                rows.append({"name": name, "error": str(err).splitlines()[0]})
            progress.advance(task)
    console.print(table3_markdown(rows))
    with console.status("running the split steps (.numpy() inside the tape): eager / janus / hand splits"):
        split_steps = partial_steps.partial_steps(args.quick)  # raises if janus disagrees with eager
    console.print(partial_steps.summary(split_steps), markup=False)
    if args.quick:  # the CI smoke run stops here: every model ran three ways and agreed with eager
        console.print(f"written: {write_json('summary-quick.json', {'models': rows, 'partial_steps': split_steps})}")
        return
    write_json("partial_steps.json", split_steps)
    models = []
    for bench in MODELS:
        with console.status(f"running {bench.__name__}"):
            models.append(bench(args.quick))
    with console.status("running per-call and profiler overhead"):
        overhead = core.per_call_overhead(args.quick)
        profiler = core.profiler_overhead(args.quick)
    with console.status("running the examples eager / janus.enable() / @janus.jit"):
        examples = transparent.examples(args.quick)
        watch = transparent.watch_overhead()
    with console.status("running the recurrent-cell loop in one process: eager / janus.enable() / tf.function"):
        recurrent = recurrent_cell.recurrent_cell(args.quick)
    with console.status("running the recursion overhead (eager / janus per tree node)"):
        recursion = recursion_overhead.recursion_overhead(args.quick)
    with console.status(f"running the ablation BASE/+UNRL/+SPCN/+PARL on {', '.join(ABLATION_MODELS)}"):
        ablation_rows = ablation.ablation(args.quick, ABLATION_MODELS)
    write_json("ablation.json", {"ablation": ablation_rows})
    with console.status("running the convergence on scikit-learn digits (eager / janus / naive tf.function)"):
        write_json("convergence.json", convergence.convergence(args.quick))
    payload = {
        "models": rows,
        "core": models,
        "overhead": overhead,
        "profiler": profiler,
        "examples": examples,
        "enable_watch_overhead": watch,
        "recurrent_cell": recurrent,
        "recursion_overhead": recursion,
        "ablation": ablation_rows,
        "partial_steps": split_steps,
    }
    path = write_json("summary.json", payload)

    table = Table(title="janus benchmarks (medians, interleaved, one process)")
    for col in ("model", "unit", "eager", "janus", "tf.function", "janus ÷ eager", "janus ÷ tf.function"):
        table.add_column(col)
    for row in model_rows(payload):
        table.add_row(*row)
    console.print(table)
    lstm = next(m for m in models if m["name"] == "lstm")  # the [control-flow] LSTM bench
    console.print(
        f"LSTM +UNRL: unrolled janus is {lstm['unrl_effect']:.2f}× janus with tf.while_loop. "
        f"Per call, 3-op function: janus {overhead['janus_us']:.1f} µs, "
        f"tf.function {overhead['tf_function_us']:.1f} µs, eager {overhead['eager_us']:.1f} µs. "
        f"Profiled LeNet step: {profiler['profiled_over_eager']:.2f}× eager. "
        f"Recurrent-cell loop under janus.enable(): {recurrent['enable_over_eager']:.1f}× eager, "
        f"{recurrent['enable_over_tf_function']:.2f}× the hand-written tf.function."
    )
    console.print(f"written: {path}")
    update_readme(path)
    console.print("benchmarks/README.md: measured block updated from these results")
    plots.main(path.parent)
    console.print(f"plots written to {path.parent}")


if __name__ == "__main__":
    main()
