"""Ctrl-C during a graph call: the call finishes and commits completely, then KeyboardInterrupt.

Python handles SIGINT between bytecodes of the main thread, so a signal that arrives while a graph
runs is acted on right after the graph returns: between the graph's TF state updates and the
commit of its Python heap writes. Raised there, it would leave the two inconsistent, and training
would go on from that state. While a graph with effects runs and commits, the signal is only
noted; the Python handler in force (KeyboardInterrupt by default) runs once the call is whole.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

_MAIN = threading.main_thread()


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Notes SIGINT while the block runs; delivers it to the previous handler when the block ends."""
    if threading.current_thread() is not _MAIN:
        yield  # signals are handled by the main thread only
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # SIG_IGN, SIG_DFL, or a handler installed outside Python
        yield
        return
    pending: list[tuple] = []
    signal.signal(signal.SIGINT, lambda signum, frame: pending.append((signum, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pending:
            previous(*pending[0])
