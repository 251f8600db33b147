"""Property test: random small programs of control-flow constructs, eager vs janus, values and gradients.

Programs come from a grammar of ``if``/``elif``/``else`` on tensors and Python ints,
``for`` over ``range`` of ints and of tensors, ``while`` on tensors, ``break``/``continue``
under Python conditions and ``return`` under tensor conditions. Each program is called
with inputs that change its branch and loop decisions; outputs and the gradients with
respect to both tensor inputs must equal eager's after every call.
"""

import linecache
import os
import textwrap

import numpy as np
import tensorflow as tf
from differential import assert_same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import janus

EXAMPLES = int(os.environ.get("JANUS_HYPOTHESIS_EXAMPLES", "25"))
served: list[bool] = []
reasons: list[str] = []


@st.composite
def blocks(draw, depth=0, in_loop=False, counter=None):
    counter = counter if counter is not None else [0]
    size = draw(st.integers(1, 3 if depth < 2 else 1))
    return [draw(statements(depth, in_loop, counter)) for _ in range(size)]


@st.composite
def statements(draw, depth, in_loop, counter):
    simple = [
        "x = tf.tanh(x * {c} + y)",
        "y = y - 0.5 * tf.sin(x) * {c}",
        "x = x + tf.cast(k, tf.float32) * 0.1",
    ]
    kinds = ["assign"] * 3
    if depth < 2:
        kinds += ["if_tensor", "if_python", "for_range", "for_tensor_range", "while"]
    if in_loop:
        kinds += ["break", "continue"]
    if depth > 0:
        kinds += ["return"]
    kind = draw(st.sampled_from(kinds))
    c = draw(st.sampled_from([-1.5, -0.5, 0.25, 1.0, 2.0]))
    if kind == "assign":
        return draw(st.sampled_from(simple)).format(c=c)
    if kind in ("break", "continue"):
        return f"if n > {draw(st.integers(0, 2))}:\n    {kind}"
    if kind == "return":
        return f"if tf.reduce_max(y) > {c}:\n    return x + y, y"
    inner = draw(blocks(depth + 1, in_loop or kind.startswith(("for", "while")), counter))
    body = textwrap.indent("\n".join(inner), "    ")
    if kind == "if_tensor":
        other = textwrap.indent("\n".join(draw(blocks(depth + 1, in_loop, counter))), "    ")
        return f"if tf.reduce_sum(x) > {c}:\n{body}\nelse:\n{other}"
    if kind == "if_python":
        return f"if n > {draw(st.integers(0, 2))}:\n{body}"
    counter[0] += 1
    i = f"i{counter[0]}"
    if kind == "for_range":
        return f"for {i} in range(n):\n{body}"
    if kind == "for_tensor_range":
        return f"for {i} in range(k):\n{body}"
    return f"{i} = tf.constant(0)\nwhile {i} < k:\n    {i} += 1\n{body}"  # increment first: `continue` is safe


def compile_program(lines: list[str]):
    body = textwrap.indent("\n".join([*lines, "return x, y"]), "    ")
    source = (
        "def program(x, y, n, k):\n"
        "    with tf.GradientTape() as tape:\n"
        "        tape.watch([x, y])\n"
        "        out = f(x, y, n, k)\n"
        "        total = tf.reduce_sum(out[0]) + tf.reduce_sum(out[1])\n"
        "    return out, tape.gradient(total, [x, y])\n"
        "\n"
        f"def f(x, y, n, k):\n{body}\n"
    )
    filename = f"<janus-property-{abs(hash(source))}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"tf": tf}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - test programs
    return namespace["program"], source


def inputs(seed: int):
    rng = np.random.default_rng(seed)
    calls = []
    for i in range(9):
        x = tf.constant(rng.choice([-1.0, -0.5, 0.5, 1.0, 1.5], size=3).astype("float32"))
        y = tf.constant(rng.choice([-1.0, 0.25, 0.75, 1.25], size=3).astype("float32"))
        n = 2 if i < 6 else int(rng.integers(0, 3))  # Python int: mostly fixed, then varying
        k = tf.constant(int(rng.integers(0, 3)) if i >= 3 else 2)
        calls.append((x, y, n, k))
    return calls


def outcome(fn, args):
    try:
        return "ok", fn(*args)
    except Exception as exc:  # noqa: BLE001
        return "raised", type(exc)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(blocks(), st.integers(0, 1000))
def test_random_control_flow_programs_match_eager(lines, seed):
    program, source = compile_program(lines)
    jitted = janus.jit(program)
    for n, args in enumerate(inputs(seed)):
        expected, actual = outcome(program, args), outcome(jitted, args)
        assert expected[0] == actual[0], f"call {n}: {expected} vs {actual}\n{source}\n{janus.explain(jitted)}"
        try:
            assert_same(expected[1], actual[1], f"call {n}")
        except AssertionError as err:
            raise AssertionError(f"{err}\n{source}\n{janus.explain(jitted)}") from None
    served.append(janus.stats(jitted)["graph_calls"] > 0)
    reasons.append(jitted.imperative_reason or "")


def test_property_programs_were_mostly_served_by_graphs():
    """Runs after the property test (file order): most random programs must have used graphs."""
    assert served, "the property test did not run"
    why = "\n".join(sorted(set(reasons)))
    assert sum(served) >= 0.6 * len(served), f"only {sum(served)} of {len(served)} programs used a graph:\n{why}"
