"""Library calls made while generating run in a sandbox: if they reach user code, janus stops.

TensorFlow and Keras callables run on symbolic tensors while a graph is built. Some of them call
back into user code: a Keras layer whose class overrides ``__call__``, a user property that Keras
reads (user layers' ``call`` and user functions a layer holds, ``Dense(activation=f)``, are swapped
for shims that convert them: see ``keras_layers``). Run now, such code would run once
and be baked into the graph. The sandbox watches the calls a library callable makes (a profile
trace function on frame entry, for this thread and only while generating) and stops the generation at the first frame of
user code, before its first line runs, so nothing of it happens. It also stops at an op-seeded
stateful random op, whose stream lives in eager's kernel cache and cannot continue in a graph
(tf.data's seeds excepted: a dataset's seed generator is made each run, as each eager construction makes it).
User code that runs inside a library call without the library calling it runs as in eager: the
finalizers a garbage collection runs there, and Python signal handlers.
"""

from __future__ import annotations

import contextlib
import gc
import signal
import sys
import threading
import types
from collections.abc import Callable, Iterator

from janus.graphgen.errors import NotConvertible
from janus.source.library import is_library_file


class _UserCodeReached(BaseException):
    """Raised into the user frame about to run (a BaseException: library code must not swallow it)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


_library_codes: dict[types.CodeType, bool] = {}
_GET_SEED = None
_LEGACY_SEED = None


def _is_user_code(code: types.CodeType) -> bool:
    known = _library_codes.get(code)
    if known is None:
        filename = code.co_filename
        known = filename.startswith("<") or is_library_file(filename)
        _library_codes[code] = known
    return not known


def _op_seed_code() -> types.CodeType:
    from tensorflow.python.framework import random_seed

    return random_seed.get_seed.__code__


def _legacy_seed_code() -> types.CodeType | None:
    """tf_keras's ``RandomGenerator.make_legacy_seed``: counts a Python seed up per random op."""
    module = sys.modules.get("tf_keras.src.backend")
    generator = getattr(module, "RandomGenerator", None)
    return getattr(getattr(generator, "make_legacy_seed", None), "__code__", None)


def _seeds_a_dataset(frame: types.FrameType) -> bool:
    """tf.data's seeds (``shuffle(seed=...)``): the op takes them as numbers and makes its seed
    generator each run of the graph, as each eager construction does; no stream lives in a kernel."""
    caller = frame.f_back
    return caller is not None and caller.f_code.co_filename.replace("\\", "/").endswith(
        "tensorflow/python/data/util/random_seed.py"
    )


_collecting: set[int] = set()  # the threads inside a garbage collection (gc.callbacks)


def _note_collection(
    phase: str, info: dict, collecting: set[int] = _collecting, thread_id: Callable[[], int] = threading.get_ident
) -> None:
    """A collection runs the finalizers (``__del__``, a generator's ``finally``, weakref callbacks) of
    whatever garbage it frees, in the thread that triggered it: that user code is no library's call.
    (Its names are bound here: at interpreter exit, collections run after module globals are gone.)"""
    if phase == "start":
        collecting.add(thread_id())
    else:
        collecting.discard(thread_id())


def _handles_a_signal(code: types.CodeType) -> bool:
    """Whether ``code`` is a Python signal handler's: Python runs it between any two bytecodes of the
    main thread, a library's included, as eager does."""
    if threading.current_thread() is not threading.main_thread():
        return False
    for signum in signal.valid_signals():
        handler = signal.getsignal(signum)
        if getattr(getattr(handler, "__func__", handler), "__code__", None) is code:
            return True
    return False


@contextlib.contextmanager
def library_call(label: str, loc: str) -> Iterator[None]:
    """Runs a library call that must not reach user code or op-seeded RNG; else NotConvertible."""
    global _GET_SEED, _LEGACY_SEED
    if _GET_SEED is None:
        _GET_SEED = _op_seed_code()
    if _LEGACY_SEED is None:
        _LEGACY_SEED = _legacy_seed_code()
    get_seed, legacy_seed = _GET_SEED, _LEGACY_SEED
    violation: list[str] = []
    unasked: list[types.FrameType] = []  # the user frame running although the library did not call it
    if _note_collection not in gc.callbacks:
        gc.callbacks.append(_note_collection)

    def _leave_unasked(frame: types.FrameType, event: str, arg: object) -> object:
        if event == "return" and unasked and frame is unasked[-1]:
            unasked.pop()
            return None
        return _leave_unasked

    def hook(frame: types.FrameType, event: str, arg: object) -> None:
        if unasked:  # inside user code the library did not call: it runs as in eager
            return None
        code = frame.f_code
        if code is legacy_seed:
            if getattr(frame.f_locals.get("self"), "_seed", None) is not None:
                violation.append("a seeded Keras random layer (its Python seed counter would advance)")
                raise _UserCodeReached(violation[-1])
            return
        if code is get_seed:
            if frame.f_locals.get("op_seed") is not None and not _seeds_a_dataset(frame):
                violation.append("an op-seeded stateful random op (its stream lives in eager's kernel cache)")
                raise _UserCodeReached(violation[-1])
            return
        if _is_user_code(code):
            if threading.get_ident() in _collecting or _handles_a_signal(code):
                unasked.append(frame)
                return _leave_unasked
            violation.append(f"user code {code.co_qualname if hasattr(code, 'co_qualname') else code.co_name}")
            raise _UserCodeReached(violation[-1])

    previous = sys.gettrace()
    sys.settrace(hook)  # called for each new Python frame only (not for C calls): cheap
    try:
        yield
    except _UserCodeReached:
        pass
    finally:
        sys.settrace(previous)
    if violation:
        raise NotConvertible(f"{label}() would run {violation[0]} while the graph is built", loc)
