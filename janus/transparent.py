"""Transparent mode: ``janus.enable()`` converts an unmodified TF2 script's functions.

A watcher (``janus.watchers``) shows transparent mode each Python call of a function it has not
decided about: on Python 3.12+ through ``sys.monitoring`` for the whole run, at no cost once a
function is decided and beside debuggers and coverage; on Python 3.11 through a global
``sys.settrace`` function that pauses when discovery is quiet and watches again when a function it
has not seen is running. The first time transparent mode sees a user function, it classifies it
(and remembers the verdict for that code object):

1. a training step: its body opens a ``tf.GradientTape`` and calls ``.gradient``;
2. the ``call`` of a user-defined Keras ``Layer``/``Model`` subclass;
3. any other user function that runs TensorFlow and has been called
   ``config.hot_calls`` times (hot-function detection).

A chosen function is routed through ``janus.jit`` by swapping its ``__code__`` for a small
trampoline with the same free variables; the jitted copy keeps the original code, so
fallbacks run exactly the user's function. Library code, generators, lambdas and nested
functions the hook cannot name are never touched. A function first called while TensorFlow traces
a graph (``tf.function``, Keras's ``model.fit`` without ``run_eagerly=True``) is classified again
when it is first called eagerly; a routed function called during a trace runs plainly in it.
``janus.disable()`` puts every original ``__code__`` back and stops the watcher.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import types
import warnings
from collections.abc import Iterator

import gast
import tensorflow as tf

from janus import watchers
from janus.config import config
from janus.diagnostics import logs
from janus.driver import JitFunction
from janus.graphgen.errors import NotConvertible
from janus.graphgen.keras_layers import is_keras_layer
from janus.graphgen.source import function_ast
from janus.partial import split
from janus.source.library import is_library_code

log = logs.logger("transparent")
_SKIPPED_FLAGS = 0x20 | 0x80 | 0x100 | 0x200  # generator, coroutine, iterable coroutine, async generator
_CO_OPTIMIZED = 0x1  # set for function bodies, not for class bodies or module code
_TRACING = (
    "called while TensorFlow traces a graph (tf.function, Keras model.fit without run_eagerly=True, "
    "Keras shape inference): its Python runs once, inside that graph"
)


@dataclasses.dataclass
class Routed:
    """A function transparent mode routed through janus."""

    function: types.FunctionType
    original: types.CodeType
    jitted: JitFunction
    why: str


class _TransparentMode:
    def __init__(self) -> None:
        self.active = False
        self.routed: dict[types.CodeType, Routed] = {}  # original code -> routing
        self.verdicts: dict[types.CodeType, str] = {}  # code -> why it is (not) routed
        # code seen only while TF traced a graph: classified again when first called eagerly
        self.tracing: set[types.CodeType] = set()
        self.calls: dict[types.CodeType, int] = {}
        self.trampolines: set[types.CodeType] = set()
        self.watcher: watchers.MonitoringWatcher | watchers.TraceWatcher | None = None

    # ------------------------------------------------------------------ switching
    def enable(self) -> None:
        if self.active:
            return
        self.active = True
        self.watcher = watchers.watcher(self)
        self.watcher.start()

    def stop_watching(self) -> None:
        """No more discovery (at exit: calls made while modules are torn down must not reach it)."""
        if self.watcher is not None:
            self.watcher.stop()

    def disable(self) -> None:
        if not self.active:
            return
        self.stop_watching()
        for routed in self.routed.values():
            routed.function.__code__ = routed.original
        self.active = False
        self.routed.clear()
        self.verdicts.clear()
        self.tracing.clear()
        self.calls.clear()
        self.trampolines.clear()

    # ------------------------------------------------------------------ discovery
    def see(self, frame: types.FrameType) -> bool:
        """Classifies the function starting in ``frame`` if it is new; True when that was news (a
        new function, a call counted towards ``hot_calls``, a route). Never raises into the program."""
        try:
            return self._discover(frame)
        except Exception as err:  # noqa: BLE001 - a failure here is janus's, never the program's
            code = frame.f_code
            self.verdicts[code] = f"left alone: transparent mode failed on it ({type(err).__name__}: {err})"
            log.warning("transparent mode leaves %s (%s:%d) alone: %s: %s", code.co_qualname,
                        code.co_filename, code.co_firstlineno, type(err).__name__, err)  # fmt: skip
            return True

    def decided(self, code: types.CodeType) -> bool:
        return code in self.verdicts or code in self.trampolines

    def progress(self, frame: types.FrameType) -> int | None:
        """For a stack sample: None when the function running in ``frame`` is decided (or still only
        called while TF traces), else the calls counted towards ``hot_calls`` (0: never seen called)."""
        code = frame.f_code
        if self.decided(code) or (code in self.tracing and not tf.executing_eagerly()):
            return None
        verdict = _static_verdict(code)
        if verdict is not None:
            self.verdicts[code] = verdict
            return None
        return self.calls.get(code, 0)

    def _discover(self, frame: types.FrameType) -> bool:
        code = frame.f_code
        if self.decided(code) or (code in self.tracing and not tf.executing_eagerly()):
            return False
        if code in self.calls:
            self.calls[code] += 1
            if self.calls[code] >= config.hot_calls:
                del self.calls[code]
                self._route_if_found(frame, "hot function running TensorFlow")
            return True
        verdict = self._classify(frame)
        if verdict == _TRACING:
            self.tracing.add(code)
            return True
        self.tracing.discard(code)
        if verdict == "hot":
            self.calls[code] = 1
        elif verdict.startswith("route:"):
            self._route_if_found(frame, verdict[len("route:") :])
        else:
            self.verdicts[code] = verdict
            if verdict != "library code":
                log.debug(
                    "leaves %s (%s:%d) alone: %s", code.co_qualname, code.co_filename, code.co_firstlineno, verdict
                )
        return True

    def _classify(self, frame: types.FrameType) -> str:
        code = frame.f_code
        verdict = _static_verdict(code)
        if verdict is not None:
            return verdict
        if not tf.executing_eagerly():  # not a frame check: Keras's run_eagerly step runs under autograph's wrapper
            return _TRACING
        try:
            node = function_ast(code)
        except (NotConvertible, SyntaxError) as err:
            return f"source unavailable: {err}"
        names = {n.id for n in gast.walk(node) if isinstance(n, gast.Name)}
        attrs = {n.attr for n in gast.walk(node) if isinstance(n, gast.Attribute)}
        if "GradientTape" in attrs | names and "gradient" in attrs:
            return "route:training step (opens a GradientTape and takes gradients)"
        if code.co_name == "call" and is_keras_layer(frame.f_locals.get("self")):
            return "route:call() of a user Keras layer"
        if names & {"tf", "keras", "tensorflow"}:
            return "hot"
        return "does not use TensorFlow"

    def _route_if_found(self, frame: types.FrameType, why: str) -> None:
        code = frame.f_code
        function = _function_of(frame)
        if function is None:
            self.verdicts[code] = "function object not reachable (nested function?): runs imperatively"
            return
        self.verdicts[code] = f"routed through janus: {why}"
        copy = types.FunctionType(code, function.__globals__, function.__name__, function.__defaults__,
                                  function.__closure__)  # fmt: skip
        copy.__kwdefaults__ = function.__kwdefaults__
        copy.__qualname__ = function.__qualname__
        jitted = JitFunction(copy)
        trampoline = _trampoline(code, _Dispatch(jitted, self))
        self.trampolines.add(trampoline)
        function.__code__ = trampoline
        self.routed[code] = Routed(function, code, jitted, why)
        log.info("routing %s (%s:%d) through janus: %s", function.__qualname__, code.co_filename,
                 code.co_firstlineno, why)  # fmt: skip

    def _snapshot(self) -> tuple[list, list, list, list]:
        """Copies of what the hook records: it may record verdicts while they are copied (a call made
        here, a weakref callback run by the garbage collector), so a copy that saw a change is retried."""
        for _ in range(100):
            try:
                return (
                    list(self.routed.copy().items()),
                    list(self.verdicts.copy().items()),
                    list(self.tracing.copy()),
                    list(self.calls.copy().items()),
                )
            except RuntimeError:  # changed size during iteration
                continue
        raise RuntimeError("janus: the transparent hook kept changing what it records")

    def report(self) -> list[str]:
        """The user functions seen, grouped: routed and served by graphs, routed but running
        imperatively (why), not routed (why). Library code, janus's own, code made by ``exec``
        (dataclass ``__init__``), comprehensions, class bodies and modules are left out."""
        served, imperative, not_routed = [], [], []
        routed_now, verdicts, tracing, hot = self._snapshot()
        for code, routed in routed_now:
            line = f"{_where(code)}: routed through janus: {routed.why}"
            jf = routed.jitted
            if jf.imperative_reason is None and jf.stats.graph_calls:
                served.append((code, f"{line}; {jf.stats.graph_calls} of {jf.stats.calls} calls served by graphs"))
            else:
                imperative.append((code, f"{line}; {_not_served(jf)}"))
        for code, verdict in verdicts:
            if code not in self.routed and _is_user_code(code, verdict):
                not_routed.append((code, f"{_where(code)}: {verdict}"))
        for code in tracing:
            if _is_user_code(code, ""):
                not_routed.append((code, f"{_where(code)}: {_TRACING}"))
        for code, calls in hot:
            if _is_user_code(code, ""):
                times = "once" if calls == 1 else f"{calls} times"
                not_routed.append((code, f"{_where(code)}: runs TensorFlow, called {times}: routed once called "
                                         f"config.hot_calls={config.hot_calls} times"))  # fmt: skip
        lines = []
        for title, group in (
            ("routed and served by graphs", served),
            ("routed, but not served by graphs", imperative),
            ("not routed", not_routed),
        ):
            if group:
                lines.append(f"  {title} ({len(group)}):")
                lines += [
                    f"    {text}" for _, text in sorted(group, key=lambda g: (g[0].co_filename, g[0].co_firstlineno))
                ]
        return lines


def _static_verdict(code: types.CodeType) -> str | None:
    """Why ``code`` is never routed, from the code object alone (None: it may be)."""
    if is_library_code(code) or split.FACTORY in code.co_qualname.split("."):  # a split function's own parts
        return "library code"
    if code.co_flags & _SKIPPED_FLAGS or code.co_name.startswith("<"):
        return "generator, coroutine, lambda or comprehension"
    if not code.co_flags & _CO_OPTIMIZED:
        return "class body or module code"
    return None


def _where(code: types.CodeType) -> str:
    return f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"


def _is_user_code(code: types.CodeType, verdict: str) -> bool:
    """A function the user wrote in a file: what ``explain()`` lists under ``enable()``."""
    if verdict in ("library code", "class body or module code") or code.co_filename.startswith("<"):
        return False  # janus's own guards, dataclass __init__ and namedtuple methods come from exec
    return not code.co_name.startswith("<") or code.co_name == "<lambda>"  # comprehensions, modules


def _not_served(jf: JitFunction) -> str:
    """Why a routed function's calls are not served by graphs (yet)."""
    s = jf.stats
    if jf.imperative_reason is not None:
        return f"runs imperatively [{jf.imperative_kind}]: {jf.imperative_reason}"
    if not s.calls:
        return "not called since it was routed (or called only inside another routed function's graph)"
    if not s.graphs_built:
        return f"no graph yet: {s.calls} calls, {s.profiled_calls} profiled"
    top = jf.fallback_reasons.most_common(1)
    why = f"; most often [{top[0][0][0]}] {top[0][0][1]}" if top else ""
    return f"its graphs served none of its {s.calls} calls{why}"


def _function_of(frame: types.FrameType) -> types.FunctionType | None:
    """The function object running in ``frame``: a module-level function or a method of ``self``."""
    code = frame.f_code
    candidate = frame.f_globals.get(code.co_name)
    if isinstance(candidate, types.FunctionType) and candidate.__code__ is code:
        return candidate
    if code.co_argcount:
        owner = frame.f_locals.get(code.co_varnames[0])
        for klass in type(owner).__mro__ if owner is not None else ():
            method = klass.__dict__.get(code.co_name)
            method = getattr(method, "__func__", method)
            if isinstance(method, types.FunctionType) and method.__code__ is code:
                return method
    return None


class _Dispatch:
    """What a routed function's trampoline calls: its jitted copy. While that copy is still
    warming up (profiling), a call tells the watcher, which on Python 3.11 watches calls again if it
    paused, so a training step first called after a long warm-up (a model built and compiled
    slowly) is found at its first call."""

    __slots__ = ("jitted", "mode", "_warm_calls")

    @property
    def __janus_target__(self) -> types.FunctionType:
        return self.jitted.fn

    def __init__(self, jitted: JitFunction, mode: _TransparentMode) -> None:
        self.jitted = jitted
        self.mode = mode
        self._warm_calls = config.profile_calls + 2

    def __call__(self, *args: object, **kwargs: object) -> object:
        if self._warm_calls:
            self._warm_calls -= 1
            if self.mode.watcher is not None:
                self.mode.watcher.routed_call()
        return self.jitted(*args, **kwargs)


def _trampoline(code: types.CodeType, dispatcher: _Dispatch) -> types.CodeType:
    """A code object with ``code``'s name and free variables whose body calls ``dispatcher``."""
    free = code.co_freevars
    source = (
        "def __janus_outer__():\n"
        + "".join(f"    {name} = None\n" for name in free)
        + f"    def {code.co_name}(*args, **kwargs):\n"
        + "".join(f"        {name}\n" for name in free)
        + "        return '__janus_dispatch__'(*args, **kwargs)\n"
        + f"    return {code.co_name}.__code__\n"
    )
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "'str' object is not callable": replaced just below
        exec(compile(source, code.co_filename, "exec"), namespace)  # noqa: S102 - generated by janus
    trampoline = namespace["__janus_outer__"]()
    consts = tuple(dispatcher if c == "__janus_dispatch__" else c for c in trampoline.co_consts)
    return trampoline.replace(co_consts=consts, co_firstlineno=code.co_firstlineno)


_mode = _TransparentMode()
# Stop watching before the interpreter tears modules down: calls made then (weakref callbacks)
# would reach the hook with half-deleted modules.
atexit.register(_mode.stop_watching)


def enable() -> None:
    """Routes the script's training steps, Keras ``call``s and hot TF functions through janus."""
    _mode.enable()


def disable() -> None:
    """Restores every function transparent mode touched and stops watching calls."""
    _mode.disable()


@contextlib.contextmanager
def enabled() -> Iterator[None]:
    """``with janus.enabled(): ...`` — transparent mode for the block only."""
    was_active = _mode.active
    enable()
    try:
        yield
    finally:
        if not was_active:
            disable()


def is_watching() -> bool:
    """Whether transparent mode's watcher still slows every Python call (discovery is not over).

    Python 3.11: until its trace function paused after ``discovery_quiet_seconds`` without a new
    function. Python 3.12+ watches through ``sys.monitoring``, which costs nothing once a function
    is decided: False."""
    watcher = _mode.watcher if _mode.active else None
    return bool(getattr(watcher, "watching", False))


def routed_functions() -> list[Routed]:
    return list(_mode.routed.copy().values())


def report() -> list[str]:
    return _mode.report() if _mode.active else []
