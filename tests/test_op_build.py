"""[robustness] The C++ op build: clear errors, reported once per process, never retried by every
function, never counted as graph build time; the program still runs imperatively and correctly."""

import os
import subprocess
import sys

SCRIPT = """
import tensorflow as tf
import janus

def f(x):
    return tf.reduce_sum(x * 2.0)

def g(x):
    return tf.reduce_max(x) + 1.0

jf, jg = janus.jit(f), janus.jit(g)
x = tf.constant([1.0, 2.0])
results = [float(jf(x)) for _ in range(6)] + [float(jg(x)) for _ in range(6)]
assert results == [6.0] * 6 + [3.0] * 6, results
for fn in (jf, jg):
    stats = janus.stats(fn)
    assert stats["graph_calls"] == 0 and stats["imperative_calls"] == 3 and stats["build_seconds"] == 0, stats
print("EXPLAIN", janus.explain(jf).replace(chr(10), " "))
"""


def run(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_no_compiler_is_reported_once_and_functions_run_imperatively(tmp_path):
    done = run({"JANUS_CACHE_DIR": str(tmp_path / "cache"), "CXX": str(tmp_path / "no-such-c++")})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "C++ ops are unavailable" in done.stdout and "cannot run the C++ compiler" in done.stdout
    assert done.stderr.count("its C++ ops are unavailable") == 1, done.stderr[-3000:]
    assert done.stderr.count("compiling its C++ ops") == 1, done.stderr[-3000:]
    assert "internal error" not in done.stdout + done.stderr


def test_an_unwritable_cache_names_janus_cache_dir(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = run({"JANUS_CACHE_DIR": str(blocker / "cache")})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cannot write its op cache" in done.stdout and "JANUS_CACHE_DIR" in done.stdout
    assert done.stderr.count("its C++ ops are unavailable") == 1, done.stderr[-3000:]
