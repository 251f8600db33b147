"""Loop sites of a function and their per-execution trip counts, for loop speculation."""

from __future__ import annotations

import dataclasses
import functools
import types

import gast

from janus.graphgen.errors import NotConvertible
from janus.graphgen.source import function_ast


@dataclasses.dataclass(frozen=True)
class LoopSite:
    header: int  # line of the `for`/`while`
    first_body: int  # line of the first statement of the body
    start: int
    end: int

    def contains(self, line: int) -> bool:
        return self.start <= line <= self.end


@functools.cache
def loop_sites(code: types.CodeType) -> tuple[LoopSite, ...]:
    try:
        node = function_ast(code)
    except (NotConvertible, SyntaxError):
        return ()
    sites = []

    def visit(n: gast.AST, top: bool) -> None:
        if not top and isinstance(n, (gast.FunctionDef, gast.Lambda, gast.ClassDef)):
            return
        if isinstance(n, (gast.For, gast.While)) and n.body[0].lineno != n.lineno:
            sites.append(LoopSite(n.lineno, n.body[0].lineno, n.lineno, n.end_lineno or n.lineno))
        for child in gast.iter_child_nodes(n):
            visit(child, False)

    visit(node, True)
    return tuple(sites)


class TripCounter:
    """Counts iterations of each active loop in one frame; closes a count when control leaves.

    An iteration is a jump from the loop's header line to its first body line (the
    first body line alone would over-count when it is itself a loop header).
    """

    def __init__(self, code: types.CodeType, sink: dict) -> None:
        self.code = code
        self.sites = loop_sites(code)
        self.sink = sink
        self.active: dict[LoopSite, int] = {}
        self.previous = -1

    def line(self, line: int) -> None:
        for site in self.sites:
            if site in self.active:
                if not site.contains(line):
                    self._close(site)
                elif line == site.first_body and self.previous == site.header:
                    self.active[site] += 1
            elif line == site.header:
                self.active[site] = 0
        self.previous = line

    def close_all(self) -> None:
        for site in list(self.active):
            self._close(site)

    def _close(self, site: LoopSite) -> None:
        self.sink.setdefault((self.code, site.header), []).append(self.active.pop(site))
