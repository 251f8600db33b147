"""[ablation] The paper's Fig. 9: janus's throughput as its optimisations are switched on one by one.

For each model (a ``benchmarks/models`` module, see ``workload.py``), janus runs under these
cumulative ``janus.config`` settings, each timed against eager:

* ``BASE``   ``speculate_branches=False, unroll_loops=False`` (and ``parallel_calls=False``
  where ``janus.config`` has that setting): every tensor ``if`` is a ``tf.cond``, every loop a
  ``tf.while_loop``.
* ``+UNRL``  also ``unroll_loops=True``.
* ``+SPCN``  also ``speculate_branches=True``.
* ``+PARL``  also ``parallel_calls=True``; only where ``janus.config`` has ``parallel_calls``.
* ``+BTCH``  also ``batch_trees=True`` (level batching of a batch loop's recursive calls, beyond
  the paper); ``BASE`` has it off.

Each setting gets a fresh program (``build``) and a fresh ``janus.jit``, and each call of its
step runs under its setting (janus reads the switches while generating a graph, which may
happen again after a fallback). The first ``profile_calls + 3`` steps of every setting are
checked against eager (an ``AssertionError`` where janus disagrees or served no call from a
graph). Each setting is then timed interleaved with the one eager program and dropped before
the next is built, so that as in ``table3`` only a few programs are alive while timing (with
five PTB-sized programs alive, all variants ran slower here, though on a loaded machine).
``ratio_to_eager`` holds each setting's speed-up over the eager run it was
paired with; ``eager`` is the median of those eager throughputs. ``janus.config`` is restored
afterwards.
"""

from __future__ import annotations

import argparse
import gc
import statistics
from collections.abc import Callable
from typing import Any

import janus
from benchmarks import table3
from benchmarks.harness import measure, write_json

DEFAULT_MODELS = ("lstm",)


def settings() -> dict[str, dict[str, bool]]:
    """The cumulative ablation settings this janus has (``+PARL`` only with ``parallel_calls``,
    ``+BTCH`` only with ``batch_trees``)."""
    parl = hasattr(janus.config, "parallel_calls")
    btch = hasattr(janus.config, "batch_trees")
    base = {"speculate_branches": False, "unroll_loops": False} | ({"parallel_calls": False} if parl else {})
    base |= {"batch_trees": False} if btch else {}
    out = {"BASE": base, "+UNRL": base | {"unroll_loops": True}}
    out["+SPCN"] = out["+UNRL"] | {"speculate_branches": True}
    if parl:
        out["+PARL"] = out["+SPCN"] | {"parallel_calls": True}
    if btch:
        out["+BTCH"] = out["+PARL" if parl else "+SPCN"] | {"batch_trees": True}
    return out


def _under(setting: dict[str, Any], step: Callable[[], Any]) -> Callable[[], Any]:
    """``step`` run with ``janus.config`` switched to ``setting`` for the duration of each call."""

    def run():
        saved = {k: getattr(janus.config, k) for k in setting}
        for k, v in setting.items():
            setattr(janus.config, k, v)
        try:
            return step()
        finally:
            for k, v in saved.items():
                setattr(janus.config, k, v)

    return run


def ablate_model(name: str, quick: bool) -> dict:
    mod = table3.module(name)
    steps = janus.config.profile_calls + 3
    eager_prog = mod.build(quick, 0)
    eager_step = mod.imperative(eager_prog, lambda f: f)
    reference = table3._trajectory(eager_step, eager_prog, mod, steps)

    row: dict[str, Any] = {"model": name, "unit": mod.UNIT}
    eager_throughputs, ratios, ms_per_step, stats = [], {}, {}, {}
    for label, setting in settings().items():
        prog = mod.build(quick, 0)
        recorder = table3._Recorder()
        step = _under(setting, mod.imperative(prog, recorder))
        diff = table3._compare(reference, table3._trajectory(step, prog, mod, steps))
        explained = "\n".join(janus.explain(f) for f in recorder.jitted)
        assert diff is None, f"{name} {label}: janus disagrees with eager, {diff}\n{explained}"
        assert recorder.total("graph_calls") > 0, f"{name} {label}: no call was served by a graph\n{explained}"
        m = measure(
            f"ablation:{name}:{label}", {"eager": eager_step, label: step}, unit=mod.UNIT,
            items_per_step=mod.items_per_step(quick), warmup=1, repeats=3 if quick else 7, steps=1 if quick else 3,
        )  # fmt: skip
        row[label] = m.throughput(label)
        eager_throughputs.append(m.throughput("eager"))
        ratios[label] = m.ratio(label, "eager")
        ms_per_step[label] = m.per_step[label] * 1e3
        stats[label] = {key: recorder.total(key) for key in ("graphs_built", "graph_calls", "calls")}
        del prog, step, recorder, m  # one janus program alive at a time
        gc.collect()
    row["eager"] = statistics.median(eager_throughputs)
    return row | {
        "ratio_to_eager": ratios,
        "eager_throughput_per_pairing": eager_throughputs,
        "ms_per_step": ms_per_step,
        "janus_stats": stats,
        "settings": settings(),
    }


def ablation(quick: bool = False, models: tuple[str, ...] | list[str] = DEFAULT_MODELS) -> list[dict]:
    """One row per model: eager and per-setting janus throughput (``UNIT``), config restored after."""
    saved = {k: getattr(janus.config, k) for k in {k for s in settings().values() for k in s}}
    try:
        return [ablate_model(name, quick) for name in models]
    finally:
        for k, v in saved.items():
            setattr(janus.config, k, v)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("models", nargs="*", default=list(DEFAULT_MODELS))
    args = parser.parse_args(argv)
    rows = ablation(args.quick, args.models)
    for row in rows:
        labels = ["BASE", "+UNRL", "+SPCN", "+PARL"]
        cells = "  ".join(f"{k} {row['ratio_to_eager'][k]:.2f}x" for k in labels if k in row)
        print(f"{row['model']:10s} eager {row['eager']:.0f} {row['unit']}  {cells}")
    path = write_json("ablation-quick.json" if args.quick else "ablation.json", {"ablation": rows})
    print(f"wrote {path}")
    return rows


if __name__ == "__main__":
    main()
