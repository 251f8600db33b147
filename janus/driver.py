"""``janus.jit``: the per-function driver of profile → assumptions → graph → cache → executor.

A call goes through these stages:

1. Profiling: the first ``profile_calls`` calls run imperatively under the tracer.
2. Generation: specs are derived from the profile (and past failures) and a graph is built.
3. Execution: the cache's compiled guards pick a graph; it runs; outputs are packed.
4. Fallback: on a guard miss or a failed JanusAssert the call re-runs imperatively
   (under the profiler, so the next graph is relaxed), the failure is counted against
   its assumption, and a new graph is generated.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import gc
import inspect
import logging
import threading
import time
import types
import weakref
from collections.abc import Iterator

import tensorflow as tf
from tensorflow.python.eager.polymorphic_function import eager_function_run

from janus import distributed
from janus.assumptions.specs import ArgSpec, ConstArg, ObjectArg, SeqArg, derive, item_key, list_pointer_keys
from janus.config import config
from janus.diagnostics import dump, logs
from janus.executor import depth
from janus.executor.cache import GraphCache
from janus.executor.cost import CostProbe
from janus.executor.recovery import exact, recoverable
from janus.executor.runner import AssumptionFailed, GraphRunner
from janus.executor.stats import Stats
from janus.graphgen import later
from janus.graphgen.errors import (
    TF_PRINTS_IN_GRAPH,
    BuildAgainWithout,
    DeferredPrintFirst,
    GenerationError,
    NeedsStaticShape,
    NotConvertible,
    RaisesHere,
    StrictModeError,
)
from janus.graphgen.generate import generate
from janus.graphgen.interpreter import is_convertible_entry
from janus.graphgen.recursion import RECURSION_DEPTH
from janus.graphgen.source import location
from janus.ops import build
from janus.partial import segment_called, split_function, statement_line
from janus.partial.recompute import recompute_function
from janus.profiler import Profile, observe, profiled_call

log_fallbacks = logs.logger("fallbacks")
log_guards = logs.logger("guards")
log_builds = logs.logger("builds")
log_breaks = logs.logger("breaks")
log_profile = logs.logger("profile")
_registry: weakref.WeakSet[JitFunction] = weakref.WeakSet()
# Held for every call of a function whose graphs commit writes to Python objects, from the guards
# (which read the heap) to the commit, and for profiled calls: two threads' `self.n += 1` never
# lose an update. Also for a function whose graphs put TF variables back when an op raises (a
# snapshot, rows saved): another call's updates in between would be undone, or its own not.
# Functions whose graphs do neither never take it. A profiled call runs
# user code, which may wait for another thread that calls a jitted function: so the lock is waited
# for at most HEAP_LOCK_PATIENCE seconds, after which the call goes on without it (never a hang).
_HEAP_LOCK = threading.RLock()
HEAP_LOCK_PATIENCE = 1.0
# How many profiled calls this thread is inside: a jitted function called from one runs plainly
# (its code is traced as part of the caller's profile, and the caller's graph will inline it).
_profiling = threading.local()
_busy = [0.0]  # seconds spent profiling and building, all functions: transparent mode's quiet excludes it


def busy_seconds() -> float:
    """Seconds janus spent in profiled calls (outermost) and graph builds so far, in this process."""
    return _busy[0]


@contextlib.contextmanager
def _heap_lock() -> Iterator[None]:
    acquired = _HEAP_LOCK.acquire(timeout=HEAP_LOCK_PATIENCE)
    if not acquired:
        log_profile.debug("the heap lock is held by a call that waits on this thread: going on without it")
    try:
        yield
    finally:
        if acquired:
            _HEAP_LOCK.release()


class JitFunction:
    """A function (or unbound method) whose calls janus serves from speculative graphs."""

    def __init__(self, fn: types.FunctionType, profile_calls: int | None = None, strict: bool = False) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.__janus_target__ = fn
        self.profile_calls = profile_calls
        self.strict = strict  # raise StrictModeError instead of running imperatively for good
        self._segment_of: JitFunction | None = None  # the split function this is a segment of
        self.signature = inspect.signature(fn)
        self.params = list(self.signature.parameters)
        self._positional_only_call = all(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in self.signature.parameters.values()
        )
        self.reset()
        _registry.add(self)

    def reset(self) -> None:
        self._lock = threading.RLock()  # janus's own state of this function; never held around user code
        self._effectful = False  # a graph of it writes Python state or puts variables back: calls take _HEAP_LOCK
        self.profile = Profile()
        self.cache = GraphCache()
        self.stats = Stats()
        self.failures: collections.Counter[str] = collections.Counter()
        self.failure_log: list[tuple[str, str]] = []  # (assumption key, what happened)
        # calls that ran eagerly after the profiling, by (kind, why): what janus.report() ranks
        self.fallback_reasons: collections.Counter[tuple[str, str]] = collections.Counter()
        self.imperative_reason: str | None = is_convertible_entry(self.fn)
        self.imperative_kind = "construct" if self.imperative_reason else ""  # see errors.KINDS
        self._said_imperative = False  # the one warning that it runs imperatively was given
        self.split = None  # janus.partial.SplitVersion: how it runs where it cannot be converted whole
        self.cost_probe: CostProbe | None = None  # set for segments: graph calls timed against eager runs
        self.caller: types.CellType | None = None  # a segment's cell in its split function (janus.partial)
        self._observations: list[list] = [[] for _ in self.params]
        self._failed_graphs: dict[tuple, set[str]] = {}  # signature of a graph dropped -> keys that failed
        self._raising_paths: set[frozenset[str]] = set()  # guard keys broken by calls that raise in eager
        self._missed: frozenset[str] = frozenset()  # guard keys the call that triggered a build broke
        self._first_build_seconds = 0.0
        self._said_over_budget = False
        self._exact_shapes = False
        self._broadcast_done = False
        self._later_lines: dict[int, str] = {}  # statements of its body run after the graph, and why
        self._later_first: NotConvertible | None = None  # the refusal that made it try them
        self._later_off = False  # tried and refused: its refusals split it, as before

    def __get__(self, instance: object, owner: type | None = None) -> object:
        if instance is None:
            return self
        return BoundJit(self, instance)

    def __repr__(self) -> str:
        return f"<janus.jit {self.fn.__qualname__}>"

    # ------------------------------------------------------------------ the call path
    def __call__(self, *args: object, **kwargs: object) -> object:
        if config.disabled or not tf.executing_eagerly() or eager_function_run.RUN_FUNCTIONS_EAGERLY:
            return self.fn(*args, **kwargs)  # tf.config.run_functions_eagerly(True) is honoured
        if getattr(_profiling, "depth", 0):  # inside a profiled call: the caller's graph will hold this call
            return self.fn(*args, **kwargs)
        if self._segment_of is not None:  # explain(): how many segments the split call ran
            segment_called(self._segment_of)
        if not self._effectful:
            return self._call(args, kwargs)
        acquired = _HEAP_LOCK.acquire(timeout=HEAP_LOCK_PATIENCE)  # _heap_lock(), inline: on every call
        if not acquired:
            log_profile.debug("the heap lock is held by a call that waits on this thread: going on without it")
        try:
            return self._call(args, kwargs)
        finally:
            if acquired:
                _HEAP_LOCK.release()

    def _call(self, args: tuple, kwargs: dict) -> object:
        stats = self.stats
        if self.imperative_reason is not None:
            stats.count("calls")
            return self._imperative(args, kwargs)
        bound = self._bind(args, kwargs)
        if bound is None:  # the call does not even bind: let Python raise its own error
            stats.count("calls", "imperative_calls")
            return self._eager_timed(args, kwargs)
        runner, flat = self.cache.lookup(bound)
        if runner is not None:
            probe = self.cost_probe
            if probe is not None and not probe.fair_now():
                probe = None
            if probe is not None and runner.warm and probe.wants_eager():
                return self._probe_eager(probe, args, kwargs)
            started = time.perf_counter()
            try:
                result = runner(flat, bound)
            except AssumptionFailed as failed:
                stats.count("calls")
                return self._after_assertion_failure(runner, failed.assumption_id, bound, args, kwargs)
            except tf.errors.OpError as err:
                stats.count("calls")
                if not recoverable(err, runner.graph):
                    if not exact(err, runner.graph):
                        self._after_error_past_writes(err)
                    raise  # TF state may already be updated: re-running would apply it twice
                return self._after_graph_error(err, bound, args, kwargs, runner.graph.caught_tries)
            if runner.warm:
                elapsed = time.perf_counter() - started
                stats.add_graph_call(elapsed)
                if probe is not None:
                    self._probe_graph(probe, elapsed)
            else:  # the first call instantiates and optimises the graph: counted as building it
                runner.warm = True
                stats.count("calls", "graph_calls")
                stats.add_seconds(time.perf_counter() - started)
            return result
        stats.count("calls")
        return self._miss(bound, args, kwargs)

    def _imperative(self, args: tuple, kwargs: dict) -> object:
        """A call of a function janus gave up converting whole: split, or eager."""
        if not self._said_imperative:
            self._say_imperative()
        if self.split is not None:  # convertible runs of statements are served by segments' graphs
            self.stats.count("split_calls")
            return self.split(args, kwargs)
        self.stats.count("imperative_calls")
        return self._eager_timed(args, kwargs)

    def _probe_eager(self, probe: CostProbe, args: tuple, kwargs: dict) -> object:
        """A call its graph could serve, run eagerly to compare the two (``cost_probe``)."""
        self.stats.count("calls", "imperative_calls")
        started = time.perf_counter()
        try:
            return self._eager(self.fn, args, kwargs)
        finally:
            elapsed = time.perf_counter() - started
            self.stats.add_eager(elapsed)
            probe.eager.append(elapsed)

    def _probe_graph(self, probe: CostProbe, elapsed: float) -> None:
        probe.graph.append(elapsed)
        if not probe.done() or self.cost_probe is not probe:
            return
        self.cost_probe = None
        graph, eager = probe.fastest()
        if graph < eager:
            return
        with self._lock:  # its statements run as Python from now on: eager's answer, faster
            self.imperative_reason = (
                f"a call of its graph ({graph * 1e6:.0f} µs) costs more than running its statements "
                f"eagerly ({eager * 1e6:.0f} µs, fastest of {probe.samples})"
            )
            self.imperative_kind = "too small"
            self._said_imperative = True
            self.cache.clear()
            if self.caller is not None:  # the split function calls the segment's statements directly
                self.caller.cell_contents = self.fn
        log_breaks.info("%s runs eagerly from now on: %s", self.fn.__qualname__, self.imperative_reason)

    def _bind(self, args: tuple, kwargs: dict) -> tuple | None:
        if not kwargs and self._positional_only_call and len(args) == len(self.params):
            return args
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError:
            return None
        bound.apply_defaults()
        return tuple(bound.arguments[p] for p in self.params)

    # ------------------------------------------------------------------ slow paths
    def _eager(self, fn, args: tuple, kwargs: dict) -> object:
        """An eager call; under Horovod its plain tapes average gradients as the graphs do."""
        if distributed.horovod() is None:
            return fn(*args, **kwargs)
        first = not self._broadcast_done
        if first:  # every rank starts from rank 0's weights
            self._broadcast_done = True
            distributed.broadcast_from_rank0(distributed.reachable_variables(self.fn, args))
        sources: list = []
        with distributed.eager_collectives(sources):
            result = fn(*args, **kwargs)
        if first:  # variables the first step created (lazily built models) are synchronised now
            distributed.broadcast_from_rank0(sources)
        return result

    def _eager_timed(self, args: tuple, kwargs: dict) -> object:
        started = time.perf_counter()
        try:
            return self._eager(self.fn, args, kwargs)
        finally:
            self.stats.add_eager(time.perf_counter() - started)

    def _profiled(self, bound: tuple, args: tuple, kwargs: dict) -> object:
        self.stats.count("profiled_calls")
        log_profile.debug("%s: imperative call under the profiler (%d so far)", self.fn.__qualname__,
                  self.stats.profiled_calls)  # fmt: skip
        observed = tuple(observe(v) for v in bound)
        for history, obs in zip(self._observations, observed):
            history.append(obs)
        started = time.perf_counter()
        _profiling.depth = getattr(_profiling, "depth", 0) + 1
        try:
            return self._eager(lambda *a, **k: profiled_call(self.profile, self.fn, a, k, observed), args, kwargs)
        finally:
            _profiling.depth -= 1
            elapsed = time.perf_counter() - started
            self.stats.add_eager(elapsed, profiled=True)
            if not _profiling.depth:
                _busy[0] += elapsed

    def _over_budget(self) -> bool:
        """Whether one more build would exceed ``config.build_budget`` of the time the function ran
        eagerly plus the time its graphs saved, once it built ``config.free_builds`` (the first is
        the price of trying; the next relax a shape or a value)."""
        stats = self.stats
        if stats.graphs_built < config.free_builds:
            return False
        spent = stats.build_seconds - self._first_build_seconds + stats.build_seconds / stats.graphs_built
        return spent > config.build_budget * (stats.eager_seconds + stats.saved_seconds)

    def _say_over_budget(self) -> None:
        if not self._said_over_budget:
            self._said_over_budget = True
            stats = self.stats
            log_fallbacks.log(
                logging.INFO if stats.graph_calls else logging.WARNING,  # loud where no graph serves
                "%s: another graph would not pay back its build time (%.2f s building so far, graphs saved "
                "%.2f s, config.build_budget=%s): calls its graphs cannot serve run eagerly until they do",
                self.fn.__qualname__, stats.build_seconds, stats.saved_seconds, config.build_budget,
            )  # fmt: skip

    def _miss(self, bound: tuple, args: tuple, kwargs: dict) -> object:
        if self.fn.__code__.co_flags & inspect.CO_GENERATOR:  # no profile to take: its body runs later
            self._go_imperative(_GENERATOR, location(self.fn.__code__), "construct", splittable=True)
            return self._imperative(args, kwargs)
        target = self.profile_calls if self.profile_calls is not None else config.profile_calls
        warming_up = len(self.profile.calls) < target
        missed: frozenset[str] = frozenset()
        if not warming_up:
            self.stats.count("guard_misses", "fallbacks")
            if self._over_budget():  # no diagnosis either: it costs more than the call at times
                self._say_over_budget()
                self._fell_back("over budget", _OVER_BUDGET)
                return self._eager_timed(args, kwargs)
            with self._lock:
                missed = self._record_guard_miss(bound)
            if missed and missed in self._raising_paths:  # such calls raise in eager: no graph for them
                return self._eager_timed(args, kwargs)
        self._missed = missed
        try:
            with _heap_lock():  # whether its graphs will write Python state is not known yet
                return self._profiled(bound, args, kwargs)
        finally:  # a call that raised was profiled too: build all the same
            if len(self.profile.calls) >= target and self.imperative_reason is None:
                self._build_unless_served(bound)

    def _build_unless_served(self, bound: tuple) -> None:
        """Builds a graph, unless another thread's build already serves these arguments."""
        started = time.perf_counter()
        with self._lock:
            if self.imperative_reason is None and self.cache.lookup(bound)[0] is None:
                self._build()
        _busy[0] += time.perf_counter() - started

    def _record_guard_miss(self, bound: tuple) -> frozenset[str]:
        """Counts the failures of the guards these arguments break; returns their keys."""
        if not self.cache.entries:
            self._fell_back("no graph", "no graph yet: the last build made none (see failures seen)")
            return frozenset()
        failing = self.cache.entries[0].graph.guards.failing(list(bound))
        for guard in failing:
            self._fail(guard.key, f"guard failed: {guard.description} ({guard.location})")
        self._fell_back("guard", "; ".join(f"{g.description} ({g.location})" for g in failing) or "guard failed")
        return frozenset(guard.key for guard in failing)

    def _after_assertion_failure(
        self, runner: GraphRunner, assumption_id: int, bound: tuple, args: tuple, kwargs: dict
    ) -> object:
        assumption = runner.graph.assumptions.get(assumption_id)
        key = assumption.key if assumption else f"assumption {assumption_id}"
        self.stats.count("assumption_failures", "fallbacks")
        self._fell_back("assertion", f"JanusAssert failed: {assumption.description if assumption else key}")
        if key == RECURSION_DEPTH:  # a deep call: eager's stack as the user's own call would have it
            eager = lambda: depth.run_uncounted(lambda: self._eager_timed(args, kwargs))  # noqa: E731
        else:
            eager = lambda: self._eager_timed(args, kwargs)  # noqa: E731
        if key in runner.graph.tolerated:  # rebuilding made this graph again: this call is eager's alone
            return eager()
        if assumption is not None and assumption.final:  # no other graph could serve it
            with self._lock:
                if key not in runner.graph.tolerated:
                    runner.graph.tolerated.add(key)
                    self._fail(key, f"JanusAssert failed: {assumption.description} (such calls run eagerly)")
            return eager()
        if self._over_budget():  # the graph stays for the calls it serves; no new one for this call
            self._say_over_budget()  # counted as an assertion above: that is why this call is eager's
            return self._eager_timed(args, kwargs)
        with self._lock:
            if self.cache.remove(runner):  # the first thread to see it fail counts it
                self._failed_graphs.setdefault(runner.graph.signature(), set()).add(key)
                self._fail(key, f"JanusAssert failed: {assumption.description if assumption else key}")
        try:
            return self._profiled(bound, args, kwargs)
        finally:
            self._build_unless_served(bound)

    def _after_graph_error(
        self, err: tf.errors.OpError, bound: tuple, args: tuple, kwargs: dict, caught_tries: tuple[str, ...] = ()
    ) -> object:
        """A graph raised a TF error that is no assumption: eager decides. Where eager raises too, the
        error is the program's own; where it does not, the graph is wrong for such calls (or a ``try``
        it speculated on caught it), and after ``config.max_failures`` of them the function runs
        imperatively rather than pay both every call: split, with the ``try`` in Python, if it has one."""
        self.stats.count("fallbacks")
        message = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
        what = f"graph raised {type(err).__name__}: {message}"
        self._fell_back("graph error", what)
        result = self._profiled(bound, args, kwargs)  # raises eager's own error
        with self._lock:
            self._fail("graph error", f"{what}; eager did not")
            if self.failures["graph error"] >= config.max_failures and caught_tries:
                reason = f"a `try` body kept raising in the graph where eager's handler caught it ({what})"
                self._go_imperative(reason, caught_tries[0], "construct", splittable=True)
            elif self.failures["graph error"] >= config.max_failures:
                reason = f"its graph raised errors where eager did not ({what})"
                self._go_imperative(reason, location(self.fn.__code__), "graph error")
        return result

    def _after_error_past_writes(self, err: tf.errors.OpError) -> None:
        """An op after a TF state update raised: eager's Python writes of the call cannot be made
        (their values were in the graph), so from now on the function runs imperatively."""
        message = str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
        with self._lock:
            self._fail("graph error", f"graph raised {type(err).__name__} after a TF state update: {message}")
            reason = f"its graph raised {type(err).__name__} after updating TF state ({message})"
            self._go_imperative(reason, location(self.fn.__code__), "graph error")

    def _fell_back(self, kind: str, why: str) -> None:
        """One call runs eagerly although profiling is over: counted for ``janus.report()``."""
        with self._lock:
            self.fallback_reasons[(kind, why)] += 1
        log_fallbacks.info("%s: a call runs eagerly [%s]: %s", self.fn.__qualname__, kind, why)

    def _fail(self, key: str, what: str) -> None:
        self.failures[key] += 1
        self.failure_log.append((key, what))
        log_guards.debug("%s: %s", self.fn.__qualname__, what)

    def _specs(self) -> list[ArgSpec]:
        specs = [
            derive(
                history,
                f"argument {name}@{location(self.fn.__code__)}",
                self.failures.__getitem__,
                config.max_failures,
                self._exact_shapes,
            )  # fmt: skip
            for name, history in zip(self.params, self._observations)
        ]
        for name, spec in zip(self.params, specs):
            if _value_failures(spec, self.failures, f"argument {name}@{location(self.fn.__code__)}"):
                raise NotConvertible(
                    f"argument {name!r} keeps changing value (a Python scalar or object); "
                    "janus specialises on such values",
                    location(self.fn.__code__),
                )
        return specs

    def _build(self) -> None:
        if len(self.cache) >= config.max_graphs:
            self._go_imperative(f"reached config.max_graphs={config.max_graphs} graphs", "", "max graphs")
            return
        try:
            build.ops()  # compiled on first use, once per process: not this graph's build time
        except build.OpBuildError as err:
            self._go_imperative(f"janus's C++ ops are unavailable: {err}", "", "ops unavailable")
            return
        presave: tuple = ()  # variables a statement run after the graph may need put back
        while True:
            specs: list[ArgSpec] = []
            try:
                specs = self._specs()
                with _progress(self.fn.__qualname__), _no_cyclic_gc():
                    graph = generate(
                        self.fn, self.params, specs, self.profile, self.failures.__getitem__,
                        dict(self._later_lines), presave=presave,
                    )  # fmt: skip
                if graph.later_snapshot and not graph.presaved and not presave:
                    presave = graph.later_snapshot  # built again: the graph reads them first, at no cost
                    continue
            except NeedsStaticShape as err:
                log_breaks.debug("%s: %s; building again with exact shapes", self.fn.__qualname__, err)
                if self._exact_shapes:
                    self._go_imperative(err.reason, err.location, err.kind, splittable=True)
                    return
                self._exact_shapes = True
                continue
            except RaisesHere as err:
                self._fail("raises", f"{err.reason} ({err.location})")
                if self._missed:  # the graphs serve other calls: calls that miss them so run eagerly
                    self._raising_paths.add(self._missed)
                    keys = ", ".join(sorted(self._missed))
                    log_fallbacks.info("%s: calls that break %s raise in eager (%s): they run eagerly, "
                             "the graphs serve the others", self.fn.__qualname__, keys, err)  # fmt: skip
                    return
                if self.failures["raises"] >= config.max_failures:
                    self._go_imperative(err.reason, err.location, err.kind)
                return  # no graph yet: the next call is profiled and tries again
            except NotConvertible as err:
                if isinstance(err, DeferredPrintFirst) and not self.failures[TF_PRINTS_IN_GRAPH]:
                    self._fail(TF_PRINTS_IN_GRAPH, f"{err.reason}: building again with every tf.print in the graph")
                    continue
                if isinstance(err, BuildAgainWithout):
                    for key in err.keys:
                        self._fail(key, err.reason)
                    continue
                if self._constant_flags(err):
                    continue
                if self._unpoint_lists(specs, err):
                    log_breaks.debug("%s: %s; building again with list items one by one", self.fn.__qualname__, err)
                    continue
                if self._run_later(err):
                    continue
                first, self._later_first = self._later_first or err, None
                self._go_imperative(first.reason, first.location, first.kind, splittable=True, refusal=first)
                return
            except GenerationError as err:
                if self._constant_flags(err):
                    continue
                self._go_imperative(f"graph build failed: {err}", err.location, "build failed", splittable=True)
                return
            except Exception as err:  # a bug in janus: never let it change the user's result
                log_builds.debug("internal error building %s", self.fn.__qualname__, exc_info=True)
                reason = f"internal error while building the graph: {type(err).__name__}: {err}"
                self._go_imperative(reason, "", "internal error")
                return
            tolerated = self._failed_graphs.get(graph.signature())
            if tolerated and graph.runtime_flags:  # the same graph failing again: try the flags as constants
                self._constant_flags(_FlagsFailed(graph.runtime_flags, ", ".join(sorted(tolerated))))
                continue
            break
        tolerated = self._failed_graphs.get(graph.signature())
        if tolerated:
            graph.tolerated = set(tolerated)
            log_fallbacks.info("%s: rebuilt the same graph after %s failed: calls where it fails run eagerly, "
                     "the graph serves the others", self.fn.__qualname__, ", ".join(sorted(tolerated)))  # fmt: skip
        self.cache.add(graph)
        self._effectful = (
            self._effectful
            or graph.commit is not None
            or graph.store_factory is not None
            or graph.counts_touches
            or bool(graph.snapshot or graph.row_saves)  # put back on an error: one call at a time
        )
        if self.stats.graphs_built == 0:
            self._first_build_seconds = graph.build_seconds
        self.stats.count("graphs_built")
        self.stats.add_seconds(graph.build_seconds)
        log_builds.info("built graph %d for %s in %.3fs", self.stats.graphs_built, self.fn.__qualname__,
                        graph.build_seconds)  # fmt: skip
        log_builds.debug(
            "graph %d of %s: %s (%d inputs, %d outputs, %d state updates), %d guards, %d JanusAsserts",
            self.stats.graphs_built, self.fn.__qualname__, graph.function_name, graph.num_inputs, graph.num_outputs,
            graph.state_writes, len(graph.guards.guards), len(graph.assumptions),
        )  # fmt: skip
        if config.dump_dir:
            self._dump(graph)

    def _dump(self, graph) -> None:
        """Writes the graph to ``config.dump_dir``; a dump that fails is said, and the call goes on."""
        try:
            dump.write(self, self.fn.__qualname__, self.stats.graphs_built, graph, config.dump_dir)
        except Exception as err:  # a full disk, or a bug in the dump: never the user's result
            log_builds.warning("%s: could not dump graph %d to %s: %s: %s", self.fn.__qualname__,
                               self.stats.graphs_built, config.dump_dir, type(err).__name__, err)  # fmt: skip

    def _run_later(self, err: NotConvertible) -> bool:
        """Whether the next build runs the statement that refused after the graph, in Python
        (``janus.graphgen.later``). Once such a build refuses for a reason of its own, the function
        is split at the first refusal, as without it."""
        if self._later_off or not config.later_statements or self.strict or config.strict:
            return False
        line = None
        if err.kind not in (later.KIND, "source", "argument") and distributed.horovod() is None:
            line = statement_line(self, err.location) if err.location else None
        if line is not None and not later.may_run_later(self.fn.__code__, line):
            line = None  # a `return`, a compound statement: nothing to try
        if line is None or line in self._later_lines or len(self._later_lines) >= MAX_LATER_STATEMENTS:
            if self._later_lines:
                log_breaks.debug("%s: statements run after the graph refused: %s", self.fn.__qualname__, err)
            self._later_off = True
            self._later_lines.clear()
            return False
        log_breaks.debug("%s: %s; building again with line %d run after the graph", self.fn.__qualname__, err, line)
        self._later_first = self._later_first or err
        self._later_lines[line] = f"[{err.kind}] {err.reason}"
        return True

    def _constant_flags(self, err: NotConvertible | GenerationError | _FlagsFailed) -> bool:
        """Bools fed at run time (train/eval flags) in a build that failed: the next build takes
        them as constants, a graph per value, as before the rung."""
        for key in err.runtime_flags:
            self._fail(f"{key}:constant", f"a bool fed at run time cannot be used here: {err.reason} ({err.location})")
        return bool(err.runtime_flags)

    def _unpoint_lists(self, specs: list[ArgSpec], err: NotConvertible) -> bool:
        """A list argument passed by pointer (a batch of trees) whose use could not be converted
        (its items indexed one by one): the next graph takes its items one by one again."""
        keys = [
            k
            for name, spec in zip(self.params, specs)
            for k in list_pointer_keys(spec, f"argument {name}@{location(self.fn.__code__)}")
        ]  # fmt: skip
        for key in keys:
            self._fail(key, f"a list passed by pointer cannot be used here: {err.reason} ({err.location})")
            self.failures[key] = config.max_failures
        return bool(keys)

    def _go_imperative(
        self, reason: str, where: str, kind: str, splittable: bool = False, refusal: NotConvertible | None = None
    ) -> None:
        """From now on every call runs in eager: said once, loudly; ``strict`` raises instead.
        ``kind`` is the refusal's stable kind (``errors.KINDS``, or the driver's own). Where a
        statement of the function refused (``splittable``), it runs split instead (janus.partial):
        the runs of statements around it are served by graphs of their own."""
        self.imperative_reason = f"{reason} ({where})" if where else reason
        self.imperative_kind = kind
        self.cache.clear()
        if refusal is not None and not (self.strict or config.strict) and config.partial_graphs:
            self.split = recompute_function(self, refusal)  # the statement between two graphs
        if splittable and self.split is None and not (self.strict or config.strict):
            self.split = split_function(self, reason, where, kind)
        self._say_imperative()

    def _say_imperative(self) -> None:
        self._said_imperative = True
        code = self.fn.__code__
        if self.strict or config.strict:
            self._said_imperative = False  # strict: every call raises
            raise StrictModeError(
                f"janus cannot serve {self.fn.__qualname__} ({code.co_filename}:{code.co_firstlineno}) from a graph: "
                f"{self.imperative_reason}"
            )
        if hasattr(self.split, "explain_lines"):
            log_breaks.warning(
                "%s (%s:%d) runs with a recomputed prefix from now on: the statement janus cannot convert runs "
                "in Python between a graph of the code before it and one of the whole function: [%s] %s. "
                "janus.explain(fn) shows both.",
                self.fn.__qualname__, code.co_filename, code.co_firstlineno, self.imperative_kind,
                self.imperative_reason,
            )  # fmt: skip
            return
        if self.split is not None:
            log_breaks.warning(
                "%s (%s:%d) runs split from now on: %d graph segments around what janus cannot convert, "
                "which runs in Python: [%s] %s. janus.explain(fn) shows the segments.",
                self.fn.__qualname__, code.co_filename, code.co_firstlineno, len(self.split.segments),
                self.imperative_kind, self.imperative_reason,
            )  # fmt: skip
            return
        log_breaks.warning(
            "%s (%s:%d) runs imperatively from now on (correct, but no speed-up): [%s] %s. "
            "janus.explain(fn) shows what janus saw; README 'When janus does nothing, and why' lists the fixes.",
            self.fn.__qualname__, code.co_filename, code.co_firstlineno, self.imperative_kind, self.imperative_reason,
        )  # fmt: skip


MAX_LATER_STATEMENTS = 8  # refused statements of one function run after its graph, at most
_GENERATOR = "a generator function: its body runs while the caller iterates, one statement at a time"


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """No cyclic garbage collection while a graph is built: a collected generator's ``finally``
    (user code, often TF ops) would run inside the build, holding TF's graph lock (a deadlock) or
    adding its ops to janus's graph. Collection resumes after the build, where eager would run it."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:  # builds in several threads: collection resumes after the last one
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


_gc_lock = threading.Lock()
_gc_pauses = 0  # builds in progress
_gc_was_enabled = True


@contextlib.contextmanager
def _progress(name: str, every: float = 5.0):
    """Says that a long graph build is still going, every ``every`` seconds."""
    started = time.perf_counter()
    done = threading.Event()

    def report() -> None:
        while not done.wait(every):
            log_builds.warning("still building the graph for %s (%.0f s)", name, time.perf_counter() - started)

    thread = threading.Thread(target=report, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()


_OVER_BUDGET = "another graph would not pay back its build time (config.build_budget)"


@dataclasses.dataclass(frozen=True)
class _FlagsFailed:
    """A rebuilt graph with run-time flags that assertions broke before (``_constant_flags``'s input)."""

    runtime_flags: tuple[str, ...]
    reason: str
    location: str = ""


def _value_failures(spec: ArgSpec, failures: collections.Counter, key: str) -> bool:
    if isinstance(spec, ConstArg) and spec.type is bool:  # a flag: a graph per value (max_graphs, budget)
        return False
    if isinstance(spec, ConstArg):
        return failures[f"{key}:value"] >= config.max_failures
    if isinstance(spec, SeqArg):
        labels = spec.keys if spec.keys is not None else range(len(spec.items))
        return any(_value_failures(s, failures, item_key(key, label)) for label, s in zip(labels, spec.items))
    if isinstance(spec, ObjectArg):  # `self` of several layers: one graph per object (max_graphs, budget)
        return False
    return failures[key] >= config.max_failures


class BoundJit:
    """A jitted method bound to an instance: ``self`` is the first argument."""

    __slots__ = ("jit_function", "instance")

    def __init__(self, jit_function: JitFunction, instance: object) -> None:
        self.jit_function = jit_function
        self.instance = instance

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self.jit_function(self.instance, *args, **kwargs)

    @property
    def __janus_target__(self) -> types.MethodType:
        return types.MethodType(self.jit_function.fn, self.instance)


class PartialJit:
    """``janus.jit(functools.partial(f, *args, **kwargs))``: ``f`` jitted, called with the bound arguments."""

    __slots__ = ("jit_function", "args", "keywords")

    def __init__(self, jitted: object, args: tuple, keywords: dict) -> None:
        self.jit_function = jitted
        self.args = args
        self.keywords = keywords

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self.jit_function(*self.args, *args, **{**self.keywords, **kwargs})


def all_functions() -> list[JitFunction]:
    return list(_registry)


def resolve(fn: object) -> JitFunction:
    if isinstance(fn, JitFunction):
        return fn
    if isinstance(fn, (BoundJit, PartialJit)):
        return resolve(fn.jit_function)
    raise TypeError(f"{fn!r} is not a janus.jit function")
