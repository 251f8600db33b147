"""Property test: random step methods mixing tensor math with host effects, eager vs janus.

Each program is a class whose ``step(self, x)`` interleaves tensor math (``x * c``,
``tf.tanh``, ``tf.reduce_sum``, ``assign_add`` on a ``tf.Variable``) with statements
that touch the host: a seeded ``random.Random`` on ``self``, ``time.perf_counter_ns()``,
``logging``, ``print`` of a tensor or of a dict, appends to a list, dict and attribute
writes on ``self``. The source is written to a real module (janus reads the source) and
the class is run on one instance eagerly and on another under ``janus.jit(Cls.step)``,
call by call: results, every attribute, and what each call printed, warned and logged
must be the same. Clock stamps differ by nature; only that they strictly increase from
call to call (and that as many are taken) is compared.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import tensorflow as tf
from differential import assert_same, outcome
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import janus

EXAMPLES = int(os.environ.get("JANUS_HYPOTHESIS_EXAMPLES", "25"))
CALLS = 6
logging.getLogger("prop").setLevel(logging.INFO)  # so that .info() records are emitted at all

MATH = {
    "scale": "x = x * {c}",
    "tanh": "x = tf.tanh(x)",
    "sum": "t = tf.reduce_sum(x)",
    "variable": "self.v.assign_add(t * {c})",
}
EFFECTS = {
    "rng": "x = x + self.rng.random()",
    "clock": "self.stamps.append(time.perf_counter_ns())",
    "log": 'logging.getLogger("prop").info("v %s", t)',
    "print_tensor": 'print("t", t)',
    "print_dict": 'print({{"n": self.n, "t": t}})',
    "append": "self.history.append(t)",
    "dict": 'self.d["k"] = t',
    "attr": "self.n += 1",
}
KINDS = {**MATH, **EFFECTS}
CONSTANTS = [0.5, -1.0, 1.5, 2.0]

TEMPLATE = """\
import logging
import random
import time

import tensorflow as tf


class Program:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.stamps = []
        self.history = []
        self.d = {{"k": tf.constant(0.0)}}
        self.n = 0
        self.v = tf.Variable(0.0)

    def step(self, x):
        t = tf.reduce_sum(x)
{body}
        return x, t + self.v
"""


def render(statements: list[tuple[str, float]]) -> str:
    lines = [KINDS[kind].format(c=c) for kind, c in statements] or ["pass"]
    return TEMPLATE.format(body=textwrap.indent("\n".join(lines), " " * 8))


def load(source: str, directory: Path) -> type:
    name = "janus_effects_prop_" + hashlib.sha1(source.encode()).hexdigest()[:16]
    path = directory / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import would: inspect.getfile() of its classes needs it
    spec.loader.exec_module(module)
    return module.Program


def snapshot(obj) -> dict:
    """Every attribute but the clock stamps (compared separately) and the RNG (by digest)."""
    return {
        "rng": hashlib.sha1(repr(obj.rng.getstate()).encode()).hexdigest(),
        "stamps": len(obj.stamps),
        "history": list(obj.history),
        "d": dict(obj.d),
        "n": obj.n,
        "v": obj.v,
    }


def inputs(seed: int) -> list[tf.Tensor]:
    rng = np.random.default_rng(seed)
    return [tf.constant(rng.uniform(-1.0, 1.0, size=3).astype(np.float32)) for _ in range(CALLS)]


def check_stamps(stamps: list[int], last: list[int], mode: str, n: int) -> None:
    assert all(a <= b for a, b in zip(stamps, stamps[1:])), f"call {n} ({mode}): clock went backwards: {stamps}"
    if stamps:
        if last:
            assert stamps[-1] > last[0], f"call {n} ({mode}): stamp {stamps[-1]} not after {last[0]}"
        last[:] = [stamps[-1]]


def run_program(statements: list[tuple[str, float]], seed: int, directory: Path) -> janus.JitFunction:
    """Runs one program eagerly and under janus; raises AssertionError at the first difference."""
    source = render(statements)
    cls = load(source, directory)
    eager_obj, janus_obj = cls(seed), cls(seed)
    jitted = janus.jit(cls.step)
    last_eager: list[int] = []
    last_janus: list[int] = []
    for n, x in enumerate(inputs(seed)):
        expected = outcome(cls.step, (eager_obj, x))
        actual = outcome(jitted, (janus_obj, x))
        try:
            assert actual[0] == expected[0], f"call {n}: eager {expected}, janus {actual}"
            assert_same(expected[1], actual[1], f"call {n} result")
            assert actual[2] == expected[2], f"call {n}: effects differ: eager {expected[2]}, janus {actual[2]}"
            assert_same(snapshot(eager_obj), snapshot(janus_obj), f"call {n} state")
            check_stamps(eager_obj.stamps, last_eager, "eager", n)
            check_stamps(janus_obj.stamps, last_janus, "janus", n)
        except Exception as err:  # noqa: BLE001 - e.g. a symbolic tensor left on the heap fails to compare
            what = str(err) if isinstance(err, AssertionError) else f"call {n}: {type(err).__name__}: {err}"
            raise AssertionError(f"{what}\n--- program ---\n{source}\n--- janus ---\n{janus.explain(jitted)}") from None
    return jitted


statement = st.tuples(st.sampled_from(sorted(KINDS)), st.sampled_from(CONSTANTS))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(st.lists(statement, min_size=1, max_size=7), st.integers(0, 1000))
def test_random_effectful_steps_match_eager(tmp_path_factory, statements, seed):
    run_program(statements, seed, tmp_path_factory.mktemp("prog", numbered=True))
