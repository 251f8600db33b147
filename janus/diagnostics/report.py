"""``janus.report()``: one summary over every jitted function, for the end of a run.

How many calls graphs served, what building cost (graphs, and the C++ ops compiled once), what the
graphs saved, and why calls ran eagerly, grouped by kind: ``imperative [<refusal kind>]`` for a
function janus gave up on (``errors.KINDS``), ``split [<kind>]`` for one whose segments run as
graphs of their own (``janus.partial``), ``guard``/``assertion``/``graph error``/``raises``/
``argument`` for single calls that fell back. Rendered with ``rich`` where it is installed.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import os

from janus.driver import JitFunction, all_functions, resolve
from janus.ops import build
from janus.transparent import routed_functions

TOP_REASONS = 5
_REASON_WIDTH = 110


@dataclasses.dataclass
class Row:
    name: str
    calls: int
    graph_calls: int
    graphs: int
    build_seconds: float
    saved_seconds: float
    status: str


@dataclasses.dataclass
class Reason:
    kind: str
    calls: int
    function: str
    what: str


def rows(functions: list[JitFunction]) -> list[Row]:
    out = []
    for jf in functions:
        s = jf.stats
        if jf.split is not None:  # its segments' graphs serve it: they have rows of their own
            status = f"split [{jf.imperative_kind}], {len(jf.split.segments)} segments"
        elif jf.imperative_reason is not None:
            status = f"imperative [{jf.imperative_kind}]"
        elif s.graph_calls or jf.cache.entries:
            status = "graphs"
        else:
            status = "profiling" if s.calls else "not called"
        code = jf.fn.__code__
        where = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"
        out.append(Row(f"{jf.fn.__qualname__} ({where})", s.calls, s.graph_calls, s.graphs_built,
                       s.build_seconds, s.saved_seconds, status))  # fmt: skip
    return sorted(out, key=lambda r: (-r.calls, r.name))


def reasons(functions: list[JitFunction]) -> list[Reason]:
    """Why calls ran eagerly (profiling aside), most frequent first."""
    found = []
    for jf in functions:
        name = jf.fn.__qualname__
        if jf.imperative_reason is not None and jf.stats.imperative_calls:
            found.append(Reason(f"imperative [{jf.imperative_kind}]", jf.stats.imperative_calls, name,
                                jf.imperative_reason))  # fmt: skip
        for (kind, what), times in jf.fallback_reasons.items():
            found.append(Reason(kind, times, name, what))
    return sorted(found, key=lambda r: (-r.calls, r.kind, r.function))


def _short(text: str, width: int = _REASON_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _headline(table: list[Row], top: list[Reason], ops_seconds: float) -> list[str]:
    calls = sum(r.calls for r in table)
    graph_calls = sum(r.graph_calls for r in table)
    share = f"{100.0 * graph_calls / calls:.1f}%" if calls else "-"
    served = sum(r.status == "graphs" for r in table)
    imperative = sum(r.status.startswith("imperative") for r in table)
    split = sum(r.status.startswith("split") for r in table)
    split_text = f", {split} split around what janus cannot convert" if split else ""
    lines = [
        f"janus: {len(table)} function{'s' * (len(table) != 1)} ({served} served by graphs{split_text}, "
        f"{imperative} imperative), "
        f"{calls} calls, {graph_calls} served by graphs ({share})",
        f"  graph builds {sum(r.build_seconds for r in table):.2f} s, C++ ops (compiled or loaded) "
        f"{ops_seconds:.2f} s, "
        f"saved by graphs {sum(r.saved_seconds for r in table):.2f} s (against eager calls)",
    ]
    routed = routed_functions()
    if routed:
        lines.append(f"  janus.enable() routed {len(routed)} function{'s' * (len(routed) != 1)} through janus")
    by_kind = collections.Counter()
    for r in top:
        by_kind[r.kind] += r.calls
    if by_kind:
        lines.append(
            "  eager calls by kind (profiling aside): " + ", ".join(f"{kind} {n}" for kind, n in by_kind.most_common())
        )
    return lines


_COLUMNS = ("function", "calls", "graph %", "graphs", "build s", "saved s", "status")


def _cells(r: Row) -> tuple[str, ...]:
    share = f"{100.0 * r.graph_calls / r.calls:.1f}" if r.calls else "-"
    return (r.name, str(r.calls), share, str(r.graphs), f"{r.build_seconds:.2f}", f"{r.saved_seconds:.2f}", r.status)


def _reason_cells(r: Reason) -> tuple[str, ...]:
    return (r.kind, str(r.calls), r.function, _short(r.what))


def _plain(headline: list[str], table: list[Row], top: list[Reason]) -> str:
    lines = list(headline)
    lines += [""] + _aligned([_COLUMNS, *(_cells(r) for r in table)], right={1, 2, 3, 4, 5})
    if top:
        lines += ["", "why calls ran eagerly (most frequent first; profiling aside):"]
        lines += _aligned([("kind", "calls", "function", "reason"), *(_reason_cells(r) for r in top)], right={1})
    return "\n".join(lines)


def _aligned(cells: list[tuple[str, ...]], right: set[int]) -> list[str]:
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    out = []
    for row in cells:
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        out.append("  " + "  ".join(parts).rstrip())
    return out


def _rich(headline: list[str], table: list[Row], top: list[Reason]) -> str:
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buffer = io.StringIO()
    console = Console(file=buffer, width=140, color_system=None, force_terminal=False)
    for line in headline:
        console.print(line, highlight=False, markup=False)
    functions = Table(*_COLUMNS, box=box.SIMPLE_HEAD, show_edge=False)
    for i, column in enumerate(functions.columns):
        column.no_wrap = i != 0
        column.justify = "right" if i in (1, 2, 3, 4, 5) else "left"
    for r in table:
        functions.add_row(*map(Text, _cells(r)))  # Text: "[library call]" is no markup
    console.print(functions)
    if top:
        console.print("why calls ran eagerly (most frequent first; profiling aside):", highlight=False, markup=False)
        why = Table("kind", "calls", "function", "reason", box=box.SIMPLE_HEAD, show_edge=False)
        why.columns[0].no_wrap = True
        why.columns[1].justify = "right"
        for r in top:
            why.add_row(*map(Text, _reason_cells(r)))
        console.print(why)
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").splitlines())


def report(*fns: object, use_rich: bool | None = None) -> str:
    """A summary of every jitted function (or of ``fns``) as text: a ``rich`` table where ``rich`` is
    installed (``use_rich=False``: plain columns)."""
    functions = [resolve(fn) for fn in fns] if fns else all_functions()
    if not functions:
        return "janus: no function has been jitted yet."
    table = rows(functions)
    every = reasons(functions)
    headline = _headline(table, every, build.build_seconds)
    top = every[:TOP_REASONS]
    if use_rich is None:
        use_rich = _has_rich()
    return _rich(headline, table, top) if use_rich else _plain(headline, table, top)


def _has_rich() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True
