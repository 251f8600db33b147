"""Partial graphs (issue #17): a function janus cannot convert whole runs split at statement level.

When one statement of a jitted function cannot be converted (``loss.numpy()``, ``float(t)``, a
numpy or scikit-learn call, ``try``/``except``, ...), the function used to run imperatively for
good. Instead, ``split`` rewrites it: each maximal run of statements that holds no unconvertible
statement becomes a call of a separately jitted *segment function*,
``(live-outs) = segment_k(live-ins)``, and the statements janus cannot convert stay Python, as do
the compound statements (``for``, ``while``, ``if``, ``with``, ``try``) that hold them, whose
bodies are split in turn. Each segment is an ordinary ``janus.jit`` function: it profiles, guards
and falls back on its own, all or nothing, and commits what it wrote before the Python statements
after it run; so the split function gives eager's answer whenever every segment does.

``split.py`` is the source-to-source rewrite and its liveness analysis; ``segments.py`` builds
the rewritten function and its segments, runs it, and reports (stats, explain, warning).
"""

from __future__ import annotations

from janus.partial.segments import (
    SplitVersion,
    explain_lines,
    segment_called,
    segment_calls,
    split_function,
    statement_line,
)

__all__ = ["SplitVersion", "explain_lines", "segment_called", "segment_calls", "split_function", "statement_line"]
