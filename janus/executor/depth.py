"""Python's recursion limit as the user's own call sees it, for the eager re-run of a call whose
recursion ran out of depth in its graph (``janus.graphgen.recursion``).

Such a call is deep: plain eager, called where the user called, may just fit. The re-run happens
below janus's own frames (the jitted call, the driver), eight of them, which would raise
``RecursionError`` where eager returns. While it runs, the limit is raised by exactly those frames.
The limit is process-wide: concurrent re-runs share one raise (the largest asked for), restored
when the last one ends.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_asked: list[int] = []  # the frames each running re-run hides
_base = [0]  # the limit before the first of them

# Frames between the caller's and the user function's: run_uncounted, the caller's lambda, the
# driver's _eager_timed and _eager.
_BELOW = 4


def run_uncounted(call: Callable[[], T]) -> T:
    """``call()`` (which calls the user function through the driver's ``_eager_timed``) with the
    recursion limit raised by janus's frames on the stack above it and the ones it adds."""
    frame, own = sys._getframe(1), 0  # noqa: SLF001 - janus's frames, up to the user's call
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "janus":
        own += 1
        frame = frame.f_back
    hidden = own + _BELOW
    with _lock:
        if not _asked:
            _base[0] = sys.getrecursionlimit()
        _asked.append(hidden)
        sys.setrecursionlimit(_base[0] + max(_asked))
    try:
        return call()
    finally:
        with _lock:
            _asked.remove(hidden)
            sys.setrecursionlimit(_base[0] + max(_asked, default=0))
