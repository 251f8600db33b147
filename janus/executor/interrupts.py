"""Ctrl-C during a graph call: the call finishes and commits completely, then KeyboardInterrupt.

Python handles SIGINT between bytecodes of the main thread, so a signal that arrives while a graph
runs is acted on right after the graph returns: between the graph's TF state updates and the
commit of its Python heap writes. Raised there, it would leave the two inconsistent, and training
would go on from that state. While a graph with effects runs and commits, the signal is only
noted; the Python handler in force (KeyboardInterrupt by default) runs once the call is whole.
This sits on the per-call path, so it uses ``_signal`` directly (about 1 µs a call).
"""

from __future__ import annotations

import _signal
import contextlib
import threading
from collections.abc import Callable, Iterator

_SIGINT = 2
_MAIN_IDENT = threading.main_thread().ident


_whole: list[tuple[Callable, list[tuple]]] = []  # the main thread's run_whole calls: (handler, pending)


def run_whole(body: Callable[[], object]) -> object:
    """Runs ``body()`` with SIGINT noted, not acted on; then delivers each one to the handler in force."""
    if threading.get_ident() != _MAIN_IDENT:
        return body()  # signals are handled by the main thread only
    previous = _signal.getsignal(_SIGINT)
    if not callable(previous):  # SIG_IGN, SIG_DFL, or a handler installed outside Python
        return body()
    pending: list[tuple] = []
    _signal.signal(_SIGINT, lambda signum, frame: pending.append((signum, frame)))
    _whole.append((previous, pending))
    try:
        return body()
    finally:
        _whole.pop()
        _signal.signal(_SIGINT, previous)
        for signum, frame in pending:  # each signal, as eager would have delivered it
            previous(signum, frame)


@contextlib.contextmanager
def let_through() -> Iterator[None]:
    """Inside ``run_whole``: user code that runs as part of the commit (a statement run after the
    graph) gets SIGINT as eager would, the signals noted so far first; noted again afterwards."""
    if threading.get_ident() != _MAIN_IDENT or not _whole:
        yield
        return
    previous, pending = _whole[-1]
    _signal.signal(_SIGINT, previous)
    try:
        while pending:
            previous(*pending.pop(0))
        yield
    finally:
        _signal.signal(_SIGINT, lambda signum, frame: pending.append((signum, frame)))
