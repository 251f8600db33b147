"""[robustness] janus.enable() never raises into the user's program, whatever the code looks like.

A corpus of modules of odd shapes (docstring then class, decorators, nested classes, exec'd code,
a latin-1 file, very long lines, class bodies with loops, TF functions among them) is written to
a temporary package and imported and run under ``janus.enable()`` in a fresh process, and its
output compared with a plain run.
"""

import subprocess
import sys
import textwrap

CORPUS = {
    "docstring_class.py": '''
        """A module docstring, then a class: the hook sees the class body's frame."""


        class Config:
            """Settings."""

            size = 3

            def scaled(self, x):
                return x * self.size


        def run():
            return Config().scaled(2)
    ''',
    "docstring_words.py": '''
        """A module docstring whose lines read like code to inspect's backward search:

        def and lambda: appear here, and
        @decorators too, so the source of a class body is searched from inside this string.
        """


        class Settings:
            rate = 0.5


        def run():
            return Settings.rate
    ''',
    "decorated.py": """
        import functools


        def twice(fn):
            @functools.wraps(fn)
            def wrapper(*args):
                return fn(*args) + fn(*args)

            return wrapper


        class Outer:
            class Inner:
                @staticmethod
                @twice
                def value():
                    return 21

            @property
            def answer(self):
                return self.Inner.value()


        def run():
            return Outer().answer
    """,
    "executed.py": """
        namespace = {}
        exec("def made(x):\\n    total = 0\\n    for i in range(x):\\n        total += i\\n    return total", namespace)


        def run():
            return namespace["made"](5) + eval("1 + 2")
    """,
    "long_lines.py": "VALUES = ["
    + ", ".join(str(i) for i in range(3000))
    + "]\n\n\ndef run():\n    return sum(VALUES)\n",
    "loop_class.py": """
        class Table:
            rows = []
            for i in range(4):
                rows.append(i * i)
            while len(rows) < 6:
                rows.append(-1)
            squares = {k: k * k for k in range(3)}


        def run():
            return Table.rows, Table.squares
    """,
    "tf_user.py": '''
        """Functions running TensorFlow, called often enough to be routed."""
        import tensorflow as tf


        class Scale:
            factor = 2.0

            def __call__(self, x):
                return tf.reduce_sum(x) * self.factor


        def step(x, scale=Scale()):
            return scale(x) + tf.reduce_mean(x)


        def run():
            return [float(step(tf.constant([1.0, float(i)]))) for i in range(12)]
    ''',
}
LATIN1 = '# -*- coding: latin-1 -*-\n"""Caf\xe9 na\xefve."""\n\n\ndef run():\n    return \'d\xe9j\xe0\'\n'

DRIVER = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "janus":
    import janus
    janus.config.discovery_quiet_seconds = 60.0
    janus.enable()
out = {}
for name in sys.argv[3:]:
    out[name] = repr(importlib.import_module(name).run())
print(json.dumps(out, sort_keys=True))
"""


def test_odd_modules_import_and_run_under_enable_as_they_do_plainly(tmp_path):
    for name, source in CORPUS.items():
        (tmp_path / name).write_text(textwrap.dedent(source))
    (tmp_path / "latin1.py").write_bytes(LATIN1.encode("latin-1"))
    names = [n[:-3] for n in CORPUS] + ["latin1"]
    runs = {}
    for mode in ("plain", "janus"):
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, str(tmp_path), mode, *names], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, f"{mode}: {done.stderr[-3000:]}"
        runs[mode] = done.stdout.strip().splitlines()[-1]
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert runs["janus"] == runs["plain"]


def test_a_failure_inside_the_hook_is_logged_once_and_that_code_left_alone(monkeypatch, caplog):
    import janus
    from janus import transparent

    def broken(frame):
        raise RuntimeError("classification broke")

    def user_function(x):
        return x + 1

    monkeypatch.setattr(transparent._mode, "_classify", broken)
    janus.config.discovery_quiet_seconds = 60.0
    try:
        with caplog.at_level("WARNING", logger="janus"):
            janus.enable()
            results = [user_function(i) for i in range(5)]
    finally:
        janus.disable()
    assert results == [1, 2, 3, 4, 5]
    messages = [r.getMessage() for r in caplog.records if "user_function" in r.getMessage()]
    assert len(messages) == 1 and "classification broke" in messages[0], messages
