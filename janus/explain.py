"""``janus.explain``: a readable report of what janus did with a function, and why."""

from __future__ import annotations

from janus.driver import JitFunction, all_functions, resolve
from janus.partial import explain_lines
from janus.transparent import report as transparent_report


def explain(fn: object = None) -> str:
    """Reports cache entries with their assumptions, failures seen, and imperative reasons.

    With no argument, reports on every function janus has touched; under ``janus.enable()`` it
    starts with the user functions seen, grouped: routed and served by graphs, routed but running
    imperatively (why), not routed (why).
    """
    if fn is not None:
        return _explain_one(resolve(fn))
    targets = sorted(all_functions(), key=lambda f: f.fn.__qualname__)
    sections = []
    transparent = transparent_report()
    if transparent:
        seen = sum(1 for line in transparent if line.startswith("    "))
        sections.append(f"janus.enable(): {seen} user functions seen\n" + "\n".join(transparent))
    sections += [_explain_one(jf) for jf in targets]
    return "\n\n".join(sections) or "janus has not converted any function yet."


def _explain_one(jf: JitFunction) -> str:
    code = jf.fn.__code__
    s = jf.stats
    lines = [
        f"janus.jit {jf.fn.__qualname__} ({code.co_filename}:{code.co_firstlineno})",
        f"  calls={s.calls} graph_calls={s.graph_calls} imperative_calls={s.imperative_calls} "
        f"profiled_calls={s.profiled_calls} fallbacks={s.fallbacks} graphs_built={s.graphs_built} "
        f"assumption_failures={s.assumption_failures} build_seconds={s.build_seconds:.3f}",
    ]
    if jf.split is not None:
        lines += explain_lines(jf)
    elif jf.imperative_reason:
        lines.append(f"  runs imperatively [{jf.imperative_kind}]: {jf.imperative_reason}")
    for n, runner in enumerate(jf.cache.entries):
        graph = runner.graph
        lines.append(
            f"  graph {n}: {graph.function_name} ({graph.num_inputs} inputs, {graph.num_outputs} outputs, "
            f"{graph.state_writes} state updates, built in {graph.build_seconds:.3f}s)"
        )
        for guard in graph.guards.guards:
            lines.append(
                f"    guard      {guard.description}  [{guard.kind.name} {guard.source.display()}; {guard.location}]"
            )
        for assumption in graph.assumptions.values():
            lines.append(f"    JanusAssert #{assumption.id} {assumption.description}  [{assumption.location}]")
        for note in graph.notes:
            lines.append(f"    note       {note}")
    if jf.failure_log:
        lines.append("  failures seen:")
        for key, what in jf.failure_log[-20:]:
            lines.append(f"    {what}  (count {jf.failures[key]})")
    return "\n".join(lines)
