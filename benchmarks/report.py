"""Renders measured results (benchmarks/results/summary.json) into the block of benchmarks/README.md."""

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


PAPER = {  # Table 3 of the JANUS paper: janus ÷ eager on a GPU host
    "lenet": 3.25, "resnet50": 1.06, "inception_v3": 1.10, "lstm": 8.03, "lm": 2.11, "treernn": 47.6,
    "treelstm": 18.4, "a3c": 5.13, "ppo": 2.18, "an": 2.61, "pix2pix": 2.15,
}  # fmt: skip


def table3_markdown(rows: list[dict]) -> str:
    """The paper's Table 3 format, measured here: one row per model."""
    lines = [
        "| model | unit | eager | janus | symbolic | janus ÷ eager (paper) | symbolic ÷ eager | janus ÷ symbolic "
        "| janus build (s) | naive tf.function |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in rows:
        if "error" in m:
            lines.append(f"| {m['name']} | | | | | | | | | not measured: {m['error'][:120]} |")
            continue
        verdict = m["naive_tf_function"].replace("|", "/")[:140]
        paired = m.get("janus_over_symbolic_paired")
        over_symbolic = f"{m['janus_over_symbolic']:.2f}×" + (f" ({paired:.2f}× paired)" if paired else "")
        lines.append(
            f"| {m['name']} | {m['unit']} | {m['imperative']:.1f} | {m['janus']:.1f} | {m['symbolic']:.1f} | "
            f"{m['janus_over_imperative']:.2f}× ({PAPER.get(m['name'], float('nan')):.2f}×) | "
            f"{m['symbolic'] / m['imperative']:.2f}× | {over_symbolic} | "
            f"{m['janus_build_seconds']:.1f} | {verdict} |"
        )
    pairs = [m for m in rows if m.get("pair_repeats")]
    if pairs:
        counts = ", ".join(f"{m['name']} {m['repeats']} + {m['pair_repeats']}" for m in pairs)
        lines += [
            "",
            "janus's and symbolic's figures pool the three-way repeats with more repeats of the two alone, "
            f"alternating (`table3._janus_against_symbolic`); repeats, three-way + two-way: {counts}.",
        ]
    return "\n".join(lines)


def cold_steps_markdown(rows: list[dict]) -> str:
    """The untimed first step of each repeat (it follows another variant's steps and runs cold)."""
    cold = [m for m in rows if m.get("cold_ms_per_step")]
    if not cold:
        return ""
    lines = [
        "",
        "",
        "Each repeat times its steps after one untimed step of the same variant (`harness.measure`'s "
        "`rewarm`): the first step after another variant's runs cold on these machines. Those first "
        "steps, medians over the repeats, and the repeats timed (more than 11 where 11 would time under 12 s):",
        "",
        "| model | repeats | cold step, eager / janus / symbolic (ms) | cold janus ÷ eager | cold janus ÷ symbolic |",
        "|---|---|---|---|---|",
    ]
    for m in cold:
        ms = m["cold_ms_per_step"]
        lines.append(
            f"| {m['name']} | {m.get('repeats', '')} | {ms['imperative']:.1f} / {ms['janus']:.1f} / "
            f"{ms['symbolic']:.1f} | {ms['imperative'] / ms['janus']:.2f}× | {ms['symbolic'] / ms['janus']:.2f}× |"
        )
    return "\n".join(lines)


def _core(payload: dict) -> list[dict]:
    """The [core]/[control-flow]/[state] benchmark rows (older summaries kept them under "models")."""
    return payload.get("core") or [m for m in payload.get("models", []) if "naive_tf_function" not in m]


def _table3_rows(payload: dict) -> tuple[list[dict], str] | None:
    rows = [m for m in payload.get("models", []) if "naive_tf_function" in m or "error" in m]
    return (rows, payload["date"]) if rows else None


def model_rows(payload: dict) -> list[list[str]]:
    rows = []
    for m in _core(payload):
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
    lstm = next((m for m in _core(payload) if m["name"] == "lstm"), None)
    if lstm:
        extra.append(
            f"LSTM ablation (+UNRL): janus with the time loop unrolled runs {lstm['unrl_effect']:.2f}× as fast as "
            f"janus with it as a `tf.while_loop` (`janus.config.unroll_loops = False`: "
            f"{lstm['janus_loop_op']:.0f} words/s)."
        )
    if "recursion_overhead" in payload:
        r = payload["recursion_overhead"]
        us = r["us_per_node"]
        extra.append(
            f"Recursion, per node of a {r['depth']}-deep chain (`benchmarks/recursion_overhead.py`): eager "
            f"{us['eager']:.1f} µs, janus {us['janus']:.1f} µs (one `JanusInvoke` and two heap reads), of which "
            f"{us['janus_no_heap']:.1f} µs is the invocation alone."
        )
        fb = r.get("forward_backward")
        if fb:
            extra.append(
                f"Forward and backward (a weight read at every node, `tape.gradient` inside the timed function): "
                f"eager {fb['us_per_node']['eager']:.1f} µs a node, janus {fb['us_per_node']['janus']:.1f} µs."
            )
        batching = r.get("batching_effect")
        if batching:
            parts = [
                f"{name}: {m['ms_per_batch']['per_node']:.1f} → {m['ms_per_batch']['batched']:.1f} ms a batch "
                f"({m['speedup']:.2f}×)"
                for name, m in batching.items()
            ]
            extra.append(
                "Level batching (`janus.config.batch_trees`: the batch loop's recursive calls run level by level, "
                "all trees at once, against one invocation a tree node; interleaved): " + "; ".join(parts) + ". "
                "The per-node lines below measure invocations, with level batching off."
            )
        bound = r.get("executor_bound")
        if bound:
            parts = [
                f"{name}: {m['graph_nodes_per_tree_node']:.0f} graph nodes run per tree node, forward and backward, "
                f"{m['executor_us_per_tree_node']:.1f} µs of executor time against "
                f"{m['measured_us_per_tree_node']:.1f} µs measured"
                for name, m in bound["models"].items()
            ]
            extra.append(
                f"What bounds the tree models: TensorFlow's executor spends {bound['executor_node_us']:.2f} µs on "
                "every node it runs, however small the kernel; " + "; ".join(parts) + "."
            )
        trim = r.get("trim_effect")
        if trim:
            parts = [
                f"{name}: {m['graph_nodes_per_tree_node']['untrimmed']:.0f} → "
                f"{m['graph_nodes_per_tree_node']['trimmed']:.0f} graph nodes a tree node, "
                f"{m['ms_per_batch']['untrimmed']:.1f} → {m['ms_per_batch']['trimmed']:.1f} ms a batch, "
                f"{m['us_saved_per_node_removed']:.2f} µs saved per node removed"
                for name, m in trim.items()
            ]
            extra.append(
                "Trimming the recursive functions' `Identity`/`NoOp` nodes (`janus.config.trim_functions`, "
                "interleaved): " + "; ".join(parts) + "."
            )
        ex = r.get("executor_effect")
        if ex:
            parts = []
            for name in ("treernn", "treelstm"):
                ms, used = ex[name]["ms_per_batch"], ex[name]["cpu_seconds_per_wall_second"]
                parts.append(
                    f"{name}: {ms['default']:.1f} → {ms['single_threaded']:.1f} ms a batch "
                    f"({used['default']:.2f} → {used['single_threaded']:.2f} CPU seconds a wall second)"
                )
            chain_us = ex["chain_forward_backward_us_per_node"]
            extra.append(
                "Recursive functions under TF's single-threaded executor instead of its default one "
                "(`janus.config.single_threaded_recursion`, interleaved): " + "; ".join(parts) + f"; the chain, "
                f"forward and backward, {chain_us['default']:.1f} → {chain_us['single_threaded']:.1f} µs a node."
            )
        runs = r.get("function_runs")
        if runs:
            extra.append(
                "One function run, in a chain of calls of a function that returns its argument: "
                f"{runs['janus_invoke']:.1f} µs through `JanusInvoke`, {runs['tf_call']:.1f} µs through TF's own "
                f"non-inlined call, {runs['if_call']:.1f} µs through an `If` left as a call, against "
                f"{runs['tanh']:.2f} µs for a `Tanh` (`recursion_overhead.function_runs`)."
            )
        par = r.get("parallel_subtrees")
        if par:
            ms, used = par["ms_per_batch"], par["cpu_seconds_per_wall_second"]
            extra.append(
                f"+PARL on {par['cores']} cores: a TreeRNN batch under janus takes {ms['parallel']:.1f} ms with "
                f"subtrees invoked in parallel and {ms['chained']:.1f} ms chained; the chained run already keeps "
                f"{used['chained']:.2f} cores busy (parallel: {used['parallel']:.2f}), so there is no idle core "
                "for a sibling subtree."
            )
    if payload.get("ablation"):
        labels = [k for k in ("BASE", "+UNRL", "+SPCN", "+PARL", "+BTCH") if any(k in r for r in payload["ablation"])]
        extra += [
            "",
            "Ablation (the paper's Fig. 9; `benchmarks/ablation.py`): janus ÷ eager as the optimisations are "
            "switched on cumulatively, each setting timed interleaved with eager:",
            "",
            "| model | eager | " + " | ".join(labels) + " |",
            "|---|---|" + "---|" * len(labels),
        ]
        for r in payload["ablation"]:
            cells = " | ".join(f"{r['ratio_to_eager'][k]:.2f}×" if k in r else "" for k in labels)
            extra.append(f"| {r['model']} | {r['eager']:.1f} {r['unit']} | {cells} |")
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
    if "recurrent_cell" in payload:
        extra += ["", recurrent_cell_markdown(payload["recurrent_cell"])]
    return "\n".join(lines + extra)


def recurrent_cell_markdown(r: dict) -> str:
    """The [enable] recurrent-cell loop timed in one process (``benchmarks/recurrent_cell.py``)."""
    ms = r["ms_per_step"]
    return (
        "Transparent mode in one process (`benchmarks/recurrent_cell.py`, the loop of "
        "`examples/recurrent_cell_enable.py`: a subclassed Keras model running a hand-written tanh cell "
        "over 12 time steps, batch 16, with a Python step counter, loss history and a log line every 25 "
        f"steps, all kept): eager {ms['eager']:.2f} ms a step, `janus.enable()` {ms['enable']:.3f} ms, "
        f"hand-written `tf.function` {ms['tf_function']:.3f} ms: **enable ÷ eager "
        f"{r['enable_over_eager']:.1f}×**, enable ÷ `tf.function` {r['enable_over_tf_function']:.2f}× "
        f"(`tf.function` ÷ eager {r['tf_function_over_eager']:.1f}×). Timed interleaved once transparent mode "
        "had stopped watching calls; the example runs above are short enough that their second half still "
        "runs under its trace hook."
    )


def horovod_markdown(payload: dict) -> str:
    when = f"on {payload['date']}" if "date" in payload else "in an earlier session"
    lines = [
        "",
        "Horovod scale factor, 2-process throughput ÷ (1-process throughput × 2), measured by "
        f"`python -m benchmarks.horovod_scale` {when}, not by `make bench` (gloo, one 2-core "
        "machine: one process already uses both cores, so this shows core sharing, not network overlap):",
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
    readme = ROOT / "benchmarks" / "README.md"
    text = readme.read_text()
    payload = json.loads(results_file.read_text())
    body = markdown(payload)
    table3 = _table3_rows(payload)
    if table3:
        rows, date = table3
        body = (
            f"**Table 3, measured** (`benchmarks/table3.py`, {date}; throughput in the unit shown, medians of "
            "interleaved repeats after warm-up; profiling and graph building excluded and reported in the JSON):\n\n"
            + table3_markdown(rows)
            + cold_steps_markdown(rows)
            + "\n\n"
            + body
        )
    horovod = results_file.parent / "horovod.json"
    if horovod.exists():
        body += "\n" + horovod_markdown(json.loads(horovod.read_text()))
    block = f"{BEGIN}\n{body}\n{END}"
    readme.write_text(re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S))


if __name__ == "__main__":
    update_readme()
