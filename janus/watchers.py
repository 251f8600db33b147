"""How ``janus.enable()`` sees the program's calls: the two watchers of transparent mode.

- Python 3.12+ (:class:`MonitoringWatcher`): a ``sys.monitoring`` (PEP 669) tool that listens to
  ``PY_START`` events. It disables the event for each code object once transparent mode has
  decided about it, so a decided function costs nothing afterwards; it watches for the whole run,
  and it replaces no ``sys.settrace`` function and no other monitoring tool (debuggers, coverage).
- Python 3.11 (:class:`TraceWatcher`): a global ``sys.settrace`` function, which makes every call
  slower, so it pauses once ``config.discovery_quiet_seconds`` pass without news. While paused, a
  ``gc`` callback looks at the running thread's stack at most every ``config.rediscovery_seconds``
  and watches calls again when it finds a function transparent mode has not decided about (an
  eval step first called after an epoch). It warns when ``enable()`` replaces a trace function
  already set, and puts that one back when it pauses.

The watchers ask transparent mode (a :class:`Discovery`) what to do with a frame; they hold no
verdicts of their own.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
import types
import warnings
from collections.abc import Hashable
from typing import Protocol

from janus.config import config
from janus.diagnostics import logs
from janus.driver import busy_seconds

log = logs.logger("transparent")
# The ids PEP 669 leaves unnamed, and the optimizer's (a JIT is one): never the debugger's,
# coverage's or the profiler's, which such tools take by convention.
_TOOL_IDS = (5, 4, 3)


class Discovery(Protocol):
    """What a watcher needs from transparent mode."""

    routed: dict

    def see(self, frame: types.FrameType) -> bool:
        """Classifies the function starting in ``frame``; True when that was news."""

    def decided(self, code: types.CodeType) -> bool:
        """Whether later calls of ``code`` can tell transparent mode nothing new."""

    def progress(self, frame: types.FrameType) -> Hashable | None:
        """None when the function running in ``frame`` needs no more calls to be seen; otherwise
        a value that changes each time discovery gets further with it (its counted calls)."""


class MonitoringWatcher:
    """Python 3.12+: ``PY_START`` events of a ``sys.monitoring`` tool, for the whole run."""

    def __init__(self, mode: Discovery, tool: int) -> None:
        self.mode = mode
        self.tool: int | None = tool

    def start(self) -> None:
        monitoring = sys.monitoring
        monitoring.use_tool_id(self.tool, "janus")
        monitoring.register_callback(self.tool, monitoring.events.PY_START, self._on_start)
        # A DISABLE outlives free_tool_id: code left alone by an earlier enable() (or by an earlier
        # user of this id) would stay unseen. This re-enables other tools' disabled events too; they
        # get each of those events once more.
        monitoring.restart_events()
        monitoring.set_events(self.tool, monitoring.events.PY_START)

    def stop(self) -> None:
        if self.tool is None:
            return
        monitoring = sys.monitoring
        monitoring.set_events(self.tool, 0)
        monitoring.register_callback(self.tool, monitoring.events.PY_START, None)
        monitoring.free_tool_id(self.tool)
        self.tool = None

    def routed_call(self) -> None:
        """A routed function was called: nothing to do, this watcher never pauses."""

    def _on_start(self, code: types.CodeType, offset: int) -> object:
        """The ``PY_START`` callback: whatever happens here must not raise into the program."""
        try:
            if not self.mode.decided(code):
                self.mode.see(sys._getframe(1))
            return sys.monitoring.DISABLE if self.mode.decided(code) else None
        except Exception:  # noqa: BLE001 - see() reports its own failures; this is a last guard
            return None


class TraceWatcher:
    """Python 3.11 (or no free monitoring tool): a ``sys.settrace`` function, paused when quiet."""

    def __init__(self, mode: Discovery) -> None:
        self.mode = mode
        self.watching = False
        self.started = False
        self.previous = None  # the trace function enable() replaced, put back when it pauses
        self.previous_threads = None  # threading.settrace's function it replaced, put back likewise
        self.owner = 0  # the thread that armed: other threads get no trace function back
        self.last_news = 0.0
        self.busy_at_news = 0.0  # janus's profiling and build seconds then (driver.busy_seconds)
        self.paused_at = 0.0
        self.sampled_at = 0.0
        # code -> its progress when a stack sample last re-armed for it (or when enable() found it
        # running): a frame that keeps running without new calls (the training loop) re-arms once
        self.nudged: dict[types.CodeType, Hashable] = {}

    def start(self) -> None:
        previous = sys.gettrace()
        if previous is not None or threading.gettrace() is not None:
            warnings.warn(
                f"janus.enable() replaces the trace function already set ({previous or threading.gettrace()!r}: "
                "a debugger or coverage?) "
                "while it discovers functions, and puts it back when it stops watching; on Python 3.12+ it uses "
                "sys.monitoring and replaces nothing",
                RuntimeWarning,
                stacklevel=4,
            )
        if threading.current_thread() is not threading.main_thread():
            warnings.warn(
                f"janus.enable() was called in thread {threading.current_thread().name!r}: on Python 3.11 it "
                "watches calls in that thread and in threads started later, not in threads already running (the "
                "main thread): call it from the thread that runs the training loop",
                RuntimeWarning,
                stacklevel=4,
            )
        self.started = True
        self.nudged.clear()
        self._note_running(sys._getframe(1))
        self._arm(previous)
        gc.callbacks.append(self._on_gc)

    def stop(self) -> None:
        self.pause()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        self.started = False

    def pause(self) -> None:
        """Discovery is quiet: a trace function slows every Python call, so remove it."""
        if not self.watching:
            return
        self.watching = False
        self.paused_at = self.sampled_at = time.monotonic()
        threading.settrace(self.previous_threads)
        self._leave_thread()
        log.info("transparent mode saw no new function for %.1f s; it stops watching until it sees one running",
                 config.discovery_quiet_seconds)  # fmt: skip

    def routed_call(self) -> None:
        """A routed function still warming up was called: the program may be about to call a new
        training step (after a slow model build), so watch again if quiet long enough."""
        if self.started and not self.watching and time.monotonic() - self.paused_at >= config.discovery_quiet_seconds:
            self._rearm("a routed function is warming up")

    def _arm(self, previous: object) -> None:
        self.watching = True
        self.previous = previous
        self.owner = threading.get_ident()
        self.previous_threads = threading.gettrace()
        self._news()
        sys.settrace(self._trace)
        threading.settrace(self._trace)

    def _rearm(self, why: str) -> None:
        if sys.gettrace() is not None:  # janus's profiler, a debugger: theirs while they run
            return
        self._arm(None)
        log.info("transparent mode watches calls again (%s)", why)

    def _news(self) -> None:
        self.last_news = time.monotonic()
        self.busy_at_news = busy_seconds()

    def _leave_thread(self) -> None:
        if sys.gettrace() == self._trace:  # never remove a trace function set after ours
            sys.settrace(self.previous if threading.get_ident() == self.owner else None)

    def _trace(self, frame: types.FrameType, event: str, arg: object) -> None:
        if not self.watching:  # paused by another thread: this one still calls it
            self._leave_thread()
            return
        if self.mode.see(frame):
            self._news()
            return
        # quiet only counts once something was routed, and not while janus profiles or builds
        quiet = time.monotonic() - self.last_news - (busy_seconds() - self.busy_at_news)
        if self.mode.routed and quiet >= config.discovery_quiet_seconds:
            self.pause()

    # ------------------------------------------------------------------ rediscovery while paused
    def _on_gc(self, phase: str, info: dict) -> None:
        """A ``gc.callbacks`` entry: collections happen in the thread that allocates, while it runs
        the program, so this samples the stack of whatever the program is doing, cheaply."""
        if phase != "stop" or self.watching or not self.started or sys.gettrace() is not None:
            return  # another trace function (janus's profiler, a debugger) runs: no re-arm, so no sample
        now = time.monotonic()
        if now - self.sampled_at < config.rediscovery_seconds:
            return
        self.sampled_at = now
        try:
            if self._note_running(sys._getframe(1)):
                self._rearm("a function it has not seen is running")
        except Exception as err:  # noqa: BLE001 - never raise into the program (this runs at any allocation)
            log.warning("transparent mode could not look at the running stack: %s: %s", type(err).__name__, err)

    def _note_running(self, frame: types.FrameType | None) -> bool:
        """Records the progress of the undecided functions on ``frame``'s stack; True when one got
        further since it was last recorded (or was never recorded)."""
        found = False
        while frame is not None:
            progress = self.mode.progress(frame)
            if progress is not None and self.nudged.get(frame.f_code) != progress:
                self.nudged[frame.f_code] = progress
                found = True
            frame = frame.f_back
        return found


def watcher(mode: Discovery) -> MonitoringWatcher | TraceWatcher:
    """The watcher for this interpreter: ``sys.monitoring`` where it exists and an id is free."""
    if sys.version_info < (3, 12):
        return TraceWatcher(mode)
    free = [tool for tool in _TOOL_IDS if sys.monitoring.get_tool(tool) is None]
    if free:
        return MonitoringWatcher(mode, free[0])
    warnings.warn(
        "janus.enable(): every sys.monitoring tool id it may use (5, 4, 3) is taken; it watches calls with "
        "sys.settrace instead, which replaces a debugger's or coverage's trace function while it discovers",
        RuntimeWarning,
        stacklevel=4,
    )
    return TraceWatcher(mode)
