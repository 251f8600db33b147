"""Builds and runs the split version of a jitted function (see ``janus.partial``).

The rewritten function and its segment functions are compiled together in a factory whose
parameters are the original's free variables, the segments' ``JitFunction``s and a helper: so they
keep the original's globals and closure cells, and the rewritten function reaches its segments
through cells, never through the user's module. Every statement keeps its line in the user's file
(``explain()`` and tracebacks point there); janus reads a segment's source from the AST registered
with ``janus.graphgen.source``.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import inspect
import logging
import threading
import types

import gast

from janus import distributed
from janus.config import config
from janus.executor.cost import CostProbe
from janus.graphgen.errors import NotConvertible
from janus.graphgen.source import function_ast, register_ast
from janus.partial import split

log = logging.getLogger("janus")
MAX_DEPTH = 4  # a segment that refuses is split again, at most this deep
# Refusals that are no statement's: the function runs imperatively as before.
UNSPLITTABLE = {"source", "internal error", "argument", "max graphs", "ops unavailable", "graph error", "raises"}


@dataclasses.dataclass
class Segment:
    plan: split.SegmentPlan
    jit: object  # the segment's JitFunction

    def describe(self) -> str:
        lines = f"line {self.plan.first_line}" if self.plan.first_line == self.plan.last_line else (
            f"lines {self.plan.first_line}-{self.plan.last_line}"
        )  # fmt: skip
        return f"{lines} (in: {', '.join(self.plan.inputs) or '-'}; out: {', '.join(self.plan.outputs) or '-'})"


# Per thread, the split calls running on it, innermost last: [SplitVersion, segment calls so far].
_running = threading.local()


def segment_called(of) -> None:
    """A call of a segment of jitted function ``of``: counted for the split call of ``of`` running
    on this thread (a generator's segments, run while another split call iterates it, are not)."""
    calls = getattr(_running, "calls", None)
    if calls and calls[-1][0] is of.split:
        calls[-1][1] += 1


@dataclasses.dataclass
class SplitVersion:
    """The function rewritten around its unconvertible statements, with its segments."""

    fn: types.FunctionType
    segments: list[Segment]
    where: str  # file:line of the refusal it was split at
    kind: str
    reason: str
    python_lines: list[int]
    # calls by how many segment calls each made (a generator's run while it is iterated: not counted)
    segments_per_call: collections.Counter[int] = dataclasses.field(default_factory=collections.Counter)
    last_segments: int = 0  # segment calls of the latest call

    def __call__(self, args: tuple, kwargs: dict) -> object:
        if self.fn.__code__.co_flags & inspect.CO_GENERATOR:
            return self.fn(*args, **kwargs)
        running = _running.__dict__.setdefault("calls", [])
        call = [self, 0]
        running.append(call)
        try:
            return self.fn(*args, **kwargs)
        finally:
            running.pop()
            self.last_segments = call[1]
            self.segments_per_call[call[1]] += 1

    def segment_runs(self) -> int:
        """Calls of its segments so far, graph-served or not."""
        return sum(s.jit.stats.calls for s in self.segments)

    def describe_calls(self) -> str:
        """How many segments its calls ran: ``explain()``'s line."""
        counted = self.segments_per_call
        calls = sum(counted.values())
        if not calls:
            return f"{self.segment_runs()} segment calls in all (a generator's calls are not counted one by one)"
        mean = sum(n * k for n, k in counted.items()) / calls
        spread = f"{min(counted)}" if len(counted) == 1 else f"{min(counted)}-{max(counted)}, mean {mean:.1f}"
        return f"a call ran {spread} segments ({calls} split calls; the last ran {self.last_segments})"


def split_function(jf, reason: str, where: str, kind: str) -> SplitVersion | None:
    """The split version of jitted function ``jf`` that refused at ``where``, or None where it
    cannot be split (the function then runs imperatively, as before)."""
    if not config.partial_graphs or kind in UNSPLITTABLE or not where:
        return None
    depth = getattr(jf, "_split_depth", 0)
    fn = jf.fn
    code = fn.__code__
    flags = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
    if depth >= MAX_DEPTH or code.co_flags & flags or code.co_name == "<lambda>" or "__class__" in code.co_freevars:
        return None
    if distributed.horovod() is not None:  # eager steps average their tapes' gradients: not across segments
        return None
    try:
        line = statement_line(jf, where)
        if line is None and not code.co_flags & inspect.CO_GENERATOR:
            return None
        # a generator splits around its yields (statements holding one stay Python, split.py)
        node = gast.gast_to_ast(copy.deepcopy(function_ast(code)))
        reader = split.observes_frame(node)
        if reader is not None:
            log.debug("janus: %s is not split: it reads its own locals (%s)", fn.__qualname__, reader)
            return None
        planned = split.plan(node, code, set() if line is None else {line})
        if not planned.segments:
            return None
        return _build(jf, planned, where, kind, reason, depth)
    except Exception:  # a bug here must never change the user's result: imperative, as before
        log.debug("janus: could not split %s", fn.__qualname__, exc_info=True)
        return None


def statement_line(jf, where: str) -> int | None:
    """The line of ``jf``'s own statement that holds the refusal at ``where`` (``file:line``): that
    line, or where it lies in a function ``jf`` calls, the line of the call (from the profile)."""
    filename, _, number = where.rpartition(":")
    if not number.isdigit():
        return None
    line = int(number)
    code = jf.fn.__code__
    try:
        node = function_ast(code)
    except NotConvertible:  # no source of its own to split (an async def): no statement either
        return None
    first, last = node.body[0].lineno, node.body[-1].end_lineno
    if filename == code.co_filename and first <= line <= last:
        return line
    callees = jf.profile.callees
    sites = [(site_line, c) for (site_code, site_line), cs in callees.items() if site_code is code for c in cs]
    best = None
    for site_line, callee in sites:
        seen: set[types.CodeType] = set()
        todo = [callee]
        while todo:
            c = todo.pop()
            if c in seen:
                continue
            seen.add(c)
            if c.co_filename == filename and line in {ln for _, _, ln in c.co_lines() if ln is not None}:
                best = site_line if best is None else min(best, site_line)
                break
            todo.extend(x for (sc, _), xs in callees.items() if sc is c for x in xs)
    return best


def _locals_at(exc: BaseException, segment) -> dict:
    """The locals a segment's eager run had when ``exc`` left it (from its frames in the traceback).
    A segment split in turn ran as its rewritten function and its own segments: their frames are
    merged outermost first, so the latest binding of each name wins."""
    targets = _codes_of(segment)
    found: dict = {}
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in targets:
            found.update(tb.tb_frame.f_locals)
        tb = tb.tb_next
    return found


def _codes_of(jit) -> set[types.CodeType]:
    """The code objects a segment's calls run: its function's, and if it runs split, its rewritten
    function's and those of its segments."""
    codes = {getattr(jit, "fn", jit).__code__}  # a segment too small for a graph is called as its function
    version = getattr(jit, "split", None)
    if version is not None:
        codes.add(version.fn.__code__)
        for seg in version.segments:
            codes |= _codes_of(seg.jit)
    return codes


def _build(jf, planned: split.Plan, where: str, kind: str, reason: str, depth: int) -> SplitVersion:
    from janus.driver import JitFunction  # the driver imports this package

    fn = jf.fn
    code = fn.__code__
    module = compile(planned.module(code.co_freevars), code.co_filename, "exec")
    factory = _code_named(module, split.FACTORY)
    # named as the user's function: log records (funcName) and tracebacks say its name, not janus's
    inner = {c.co_name: c.replace(co_name=code.co_name) for c in factory.co_consts if isinstance(c, types.CodeType)}
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    cells[split.LOCALS_AT] = types.CellType(_locals_at)

    def make(c: types.CodeType, name: str, defaults: tuple | None) -> types.FunctionType:
        made = types.FunctionType(c, fn.__globals__, name, defaults, tuple(cells[n] for n in c.co_freevars))
        made.__module__ = fn.__module__
        return made

    segments = []
    for seg in planned.segments:
        seg_fn = make(inner[seg.def_name], seg.def_name, None)
        seg_fn.__qualname__ = f"{fn.__qualname__}.<segment {seg.index}: {_lines(seg)}>"
        register_ast(seg_fn.__code__, gast.ast_to_gast(seg.node))
        seg_jit = JitFunction(seg_fn, profile_calls=jf.profile_calls)
        seg_jit._split_depth = depth + 1  # noqa: SLF001
        seg_jit._segment_of = jf  # noqa: SLF001
        if config.segment_cost_check:  # a segment too small to pay for a graph call runs eagerly
            seg_jit.cost_probe = CostProbe()
        cells[seg.name] = seg_jit.caller = types.CellType(seg_jit)  # holds seg_fn itself once too small
        segments.append(Segment(seg, seg_jit))
    new = make(inner[planned.function.name], fn.__name__, fn.__defaults__)
    new.__kwdefaults__ = dict(fn.__kwdefaults__) if fn.__kwdefaults__ else None
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    register_ast(new.__code__, gast.ast_to_gast(planned.function))
    return SplitVersion(new, segments, where, kind, reason, planned.python_lines)


def _code_named(code: types.CodeType, name: str) -> types.CodeType:
    """The code object called ``name`` within ``code`` (the factory, maybe in a class body)."""
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name == name:
                return const
            with contextlib.suppress(LookupError):
                return _code_named(const, name)
    raise LookupError(name)


def _lines(seg: split.SegmentPlan) -> str:
    return f"L{seg.first_line}" if seg.first_line == seg.last_line else f"L{seg.first_line}-{seg.last_line}"


def segment_calls(jf) -> int:
    """Calls of ``jf``'s segments (and theirs, where split in turn) that graphs served."""
    version = getattr(jf, "split", None)
    if version is None:
        return 0
    prefix = getattr(version, "prefix", None)  # a recomputed prefix's graph (janus.partial.recompute)
    served = prefix.stats.graph_calls if prefix is not None else 0
    return served + sum(s.jit.stats.graph_calls + segment_calls(s.jit) for s in version.segments)


def explain_lines(jf, indent: str = "  ") -> list[str]:
    """``explain()``'s lines about how ``jf`` runs split: the break, then each segment."""
    version = getattr(jf, "split", None)
    if version is None:
        return []
    if hasattr(version, "explain_lines"):  # a recomputed prefix (janus.partial.recompute)
        return version.explain_lines(indent)
    lines = [
        f"{indent}runs split into {len(version.segments)} graph segments; break at {version.where} "
        f"[{version.kind}]: {version.reason}",
        f"{indent}  Python keeps the statements at lines {', '.join(map(str, version.python_lines)) or '-'}",
        f"{indent}  {version.describe_calls()}",
    ]
    for n, seg in enumerate(version.segments, 1):
        s = seg.jit.stats
        lines.append(
            f"{indent}  segment {n}: {seg.describe()}: calls={s.calls} graph_calls={s.graph_calls} "
            f"graphs_built={s.graphs_built}"
        )
        if getattr(seg.jit, "split", None) is not None:
            lines += explain_lines(seg.jit, indent + "    ")
        elif seg.jit.imperative_reason:
            lines.append(f"{indent}    runs imperatively [{seg.jit.imperative_kind}]: {seg.jit.imperative_reason}")
    return lines
