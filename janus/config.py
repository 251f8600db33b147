"""``janus.config``: the knobs of the JIT, readable and writable at run time."""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass
class Config:
    """Process-wide janus settings.

    Attributes:
        profile_calls: calls run imperatively under the profiler before a graph is built
            (the paper's default is 3).
        max_failures: failures of one assumption before janus stops speculating on it.
        max_graphs: graphs kept per function; past it the function runs imperatively.
        build_budget: after its first graph, a function builds another only while its build time
            stays within this fraction of the time its calls ran eagerly plus the time its graphs
            saved; until then calls its graphs cannot serve run eagerly (never slower than eager
            by more than this fraction, and profiling).
        free_builds: graphs a function may build whatever the budget (the first, and two relaxations).
        small_tensor_elements: integer/bool tensors with at most this many elements whose value
            stayed constant while profiling are specialised to constants (checked by a JanusAssert).
            Float tensors never are: a constant would cut their gradients.
        log_level: what janus logs (``JANUS_LOG``): a level for all of janus ("warning", "info",
            "debug") and/or named channels shown at DEBUG ("fallbacks,guards,builds,breaks",
            "transparent", "profile", "all"); see ``janus.diagnostics.logs``.
        dump_dir: when set, each graph's op trace (guards, ops, state updates, commit), its GraphDef
            and a TensorBoard run per function and graph are written here (``janus.diagnostics.dump``).
        disabled: every jit is a pass-through (``JANUS_DISABLE=1``).
        speculate_branches: inline the side of a tensor ``if`` that every profiled call took,
            behind a JanusAssert (off: always ``tf.cond``). An ablation switch.
        unroll_loops: unroll loops whose trip count was fixed while profiling (or is fixed by
            a guarded shape), behind a JanusAssert (off: always ``tf.while_loop``). An ablation switch.
        parallel_calls: independent invocations of a recursive function (the two subtrees of
            a node) run in parallel (off: chained in program order). An ablation switch.
        trim_functions: recursive graph functions run without the nodes that only forward a
            tensor (``janus.graphgen.function_trim``). An ablation switch.
        single_threaded_recursion: recursive graph functions run under TensorFlow's
            single-threaded executor, inline on the invoking thread (off: TF's default executor,
            nodes scheduled on the inter-op pool; ``csrc/janus_invoke.cc``). An ablation switch.
        batch_trees: a loop's calls of a recursive function over a batch of trees run level by
            level, all trees at once (``janus.graphgen.tree_batching``; off: one invocation per
            node). An ablation switch.
        max_unroll: loops longer than this are converted to ``tf.while_loop`` instead.
        hot_calls: with ``janus.enable()``, calls after which a user function running TensorFlow
            is routed through janus (training steps and Keras ``call`` are routed at once).
        discovery_quiet_seconds: Python 3.11: once ``janus.enable()`` routed a function, it stops
            watching calls (its ``sys.settrace`` function slows Python) when this long passes without
            a new function. Python 3.12+ watches for the whole run at no cost (``sys.monitoring``).
        rediscovery_seconds: Python 3.11: while ``janus.enable()`` is not watching calls, how often
            at most it looks at the running stack (at a garbage collection) for a function it has
            not decided about, and watches calls again when it finds one (a function first called late).
        partial_graphs: a function janus cannot convert whole runs split at statement level
            (``janus.partial``): the runs of statements around what it cannot convert are served by
            graphs of their own, the rest runs in Python (off: the whole function runs imperatively).
        later_statements: a refused statement whose result only Python uses (``.numpy()`` for a
            metric, a scikit-learn call, a log line) runs in Python after the whole graph, on the
            values it read, where janus can show that nothing between sees the difference
            (``janus.graphgen.later``); otherwise, or off, the function runs split.
        recompute_prefix: a refused statement whose results the rest of the function needs (targets
            assigned in NumPy from predictions) runs between two graphs: the code before it, if it
            has no effect, as a graph, then the whole function as one graph fed the statement's
            results, computing that code again (``janus.partial.recompute``); otherwise the
            function runs split.
        segment_cost_check: a segment's first warm graph calls alternate with eager runs of its
            statements, and a segment whose graph call is the slower (one or two ops between Python
            statements) runs as plain Python from then on (off: every segment keeps its graph).
        strict: raise ``janus.StrictModeError`` where a function would run imperatively for good
            (like ``torch.compile(fullgraph=True)``); per function: ``janus.jit(strict=True)``.
    """

    profile_calls: int = 3
    max_failures: int = 2
    max_graphs: int = 8
    build_budget: float = 0.2
    free_builds: int = 3
    small_tensor_elements: int = 16
    log_level: str = "warning"
    dump_dir: str | None = None
    disabled: bool = False
    speculate_branches: bool = True
    unroll_loops: bool = True
    parallel_calls: bool = True
    trim_functions: bool = True
    single_threaded_recursion: bool = True
    batch_trees: bool = True
    max_unroll: int = 256
    hot_calls: int = 5
    discovery_quiet_seconds: float = 1.0
    rediscovery_seconds: float = 0.5
    strict: bool = False
    partial_graphs: bool = True
    later_statements: bool = True
    recompute_prefix: bool = True
    segment_cost_check: bool = True

    def __setattr__(self, name: str, value: object) -> None:
        if name not in {f.name for f in dataclasses.fields(self)}:
            raise AttributeError(f"janus.config has no setting {name!r}")
        super().__setattr__(name, value)
        if name == "log_level":
            from janus.diagnostics import logs  # here: janus.diagnostics is imported after config

            logs.apply(str(value))


def _from_environment() -> Config:
    cfg = Config()
    cfg.disabled = os.environ.get("JANUS_DISABLE", "") not in ("", "0")
    cfg.log_level = os.environ.get("JANUS_LOG", "warning")
    cfg.dump_dir = os.environ.get("JANUS_DUMP_DIR") or None
    return cfg


config = _from_environment()
