"""Branch sites of a function and the sequence of outcomes each took, for path speculation."""

from __future__ import annotations

import dataclasses
import functools
import types

import gast

from janus.graphgen.errors import NotConvertible
from janus.graphgen.source import function_ast


@dataclasses.dataclass(frozen=True)
class BranchSite:
    header: int  # line of the `if`
    test_end: int  # last line of its test
    first_body: int


@functools.cache
def branch_sites(code: types.CodeType) -> dict[int, BranchSite]:
    try:
        node = function_ast(code)
    except (NotConvertible, SyntaxError):
        return {}
    sites = {}

    def visit(n: gast.AST, top: bool) -> None:
        if not top and isinstance(n, (gast.FunctionDef, gast.Lambda, gast.ClassDef)):
            return
        if isinstance(n, gast.If):
            test_end = getattr(n.test, "end_lineno", None) or n.lineno
            if n.body[0].lineno > test_end:
                sites[n.lineno] = BranchSite(n.lineno, test_end, n.body[0].lineno)
        for child in gast.iter_child_nodes(n):
            visit(child, False)

    visit(node, True)
    return sites


class BranchWatcher:
    """Records, in one frame, the outcome of every evaluation of each ``if`` in order."""

    def __init__(self, code: types.CodeType, sink: dict[tuple, list[bool]]) -> None:
        self.code = code
        self.sites = branch_sites(code)
        self.sink = sink
        self.pending: BranchSite | None = None

    def line(self, line: int) -> None:
        site = self.pending
        if site is not None and not (site.header <= line <= site.test_end):
            self.sink.setdefault((self.code, site.header), []).append(line == site.first_body)
            self.pending = None
        if line in self.sites:
            self.pending = self.sites[line]
