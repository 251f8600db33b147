"""The ``sys.settrace`` profiler that watches the first calls of a jitted function.

Only user-code frames get a local tracer (line and return events); library frames
are skipped at their call event, so TensorFlow internals cost one cheap callback per
frame. When no profiled call is running no trace function is installed at all.
"""

from __future__ import annotations

import sys
import threading
import types

from janus.profiler.branches import BranchWatcher, branch_sites
from janus.profiler.heapreads import is_resolved, reads_by_line, resolve
from janus.profiler.loops import TripCounter, loop_sites
from janus.profiler.observe import observe, observe_read
from janus.profiler.profile import RETURN_SAMPLES, CallRecord, Profile
from janus.source.library import is_library_code

_active = threading.local()
_MAX_STEP = 64  # frames a level looked through (janus.graphgen.recursion assumes more where none was found)


class _Recorder:
    def __init__(self, profile: Profile, record: CallRecord) -> None:
        self.profile = profile
        self.record = record
        self.loops: dict[types.FrameType, TripCounter] = {}
        self.branches: dict[types.FrameType, BranchWatcher] = {}
        self.unwinding: set[types.FrameType] = set()  # frames an exception is passing through

    def global_trace(self, frame: types.FrameType, event: str, arg: object):
        if event != "call" or is_library_code(frame.f_code):
            return None
        caller = frame.f_back
        if caller is not None and not is_library_code(caller.f_code):
            self.profile.callees[(caller.f_code, caller.f_lineno)].add(frame.f_code)
            self._recursion_step(frame, caller)
        return self.local_trace

    def _recursion_step(self, frame: types.FrameType, caller: types.FrameType) -> None:
        """Where ``frame`` runs a function already running in the user frames above it: how many
        frames one level of that recursion takes (a call through a generator expression: two)."""
        code, step = frame.f_code, 1
        while caller is not None and step <= _MAX_STEP and not is_library_code(caller.f_code):
            if caller.f_code is code:
                steps = self.profile.recursion_steps
                steps[code] = max(steps.get(code, 0), step)
                return
            caller, step = caller.f_back, step + 1

    def local_trace(self, frame: types.FrameType, event: str, arg: object):
        if event == "exception":  # a `return` event that follows without a `line` is the frame unwinding
            self.unwinding.add(frame)
        elif event == "line":
            self.unwinding.discard(frame)  # the exception was caught here
            code, line = frame.f_code, frame.f_lineno
            self.profile.line_hits[(code, line)] += 1
            if loop_sites(code):
                counter = self.loops.get(frame)
                if counter is None:
                    counter = self.loops[frame] = TripCounter(code, self.profile.trip_counts)
                counter.line(line)
            if branch_sites(code):
                watcher = self.branches.get(frame)
                if watcher is None:
                    watcher = self.branches[frame] = BranchWatcher(code, self.record.branches)
                watcher.line(line)
            for read in reads_by_line(code).get(line, ()):
                value = resolve(frame, read)
                if is_resolved(value):
                    self.profile.heap_reads[(code, line, read)].append(observe_read(value))
        elif event == "return":
            if frame in self.unwinding:  # raised: no value returned (arg is None)
                self.unwinding.discard(frame)
            else:
                self.profile.returns[frame.f_code].add(type(arg))
                samples = self.profile.return_observations[frame.f_code]
                if len(samples) < RETURN_SAMPLES:
                    samples.append(observe(arg))
            counter = self.loops.pop(frame, None)
            if counter is not None:
                counter.close_all()
            self.branches.pop(frame, None)
        return self.local_trace


def profiled_call(profile: Profile, fn, args: tuple, kwargs: dict, observed_args: tuple):
    """Runs ``fn(*args, **kwargs)`` imperatively while recording into ``profile``."""
    record = CallRecord(observed_args)
    profile.calls.append(record)
    if getattr(_active, "on", False):  # nested jitted call inside a profiled one: already traced
        result = fn(*args, **kwargs)
        record.result = observe(result)
        return result
    recorder = _Recorder(profile, record)
    previous = sys.gettrace()
    _active.on = True
    sys.settrace(recorder.global_trace)
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:
        record.raised = type(exc).__name__
        raise
    finally:
        sys.settrace(previous)
        _active.on = False
    record.result = observe(result)
    return result
