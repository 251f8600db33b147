"""``config.dump_dir`` (``JANUS_DUMP_DIR``): the dumped program is what the graph runs, and
TensorBoard gets one run per function and graph."""

from __future__ import annotations

import pathlib

import tensorflow as tf

import janus
from tests.differential import run_differential


class Model:
    def __init__(self) -> None:
        self.total = tf.Variable(0.0)
        self.steps = 0


def make_step():
    model = Model()

    def step(x):
        if tf.reduce_sum(x) > 0:  # goes both ways while profiling: a tf.cond in the graph
            y = x * 2.0
        else:
            y = x - 1.0
        model.total.assign_add(tf.reduce_sum(y))
        model.steps += 1
        return y

    return step, lambda: (model.total, model.steps)


def inputs(n: int) -> list[tuple]:
    return [(tf.constant([1.0, 2.0 - 5.0 * (i % 2)]),) for i in range(n)]


def test_dump_names_the_cond_the_variable_update_and_the_heap_write(tmp_path):
    janus.config.dump_dir = str(tmp_path)
    model = Model()

    @janus.jit
    def step(model, x):
        if tf.reduce_sum(x) > 0:
            y = x * 2.0
        else:
            y = x - 1.0
        model.total.assign_add(tf.reduce_sum(y))
        model.steps += 1
        return y

    eager = Model()
    for (x,) in inputs(6):
        step(model, x)
        step.fn(eager, x)
    assert (model.steps, float(model.total)) == (eager.steps, float(eager.total))
    assert janus.stats(step)["graph_calls"] >= 1
    text = (
        tmp_path / "test_dump_names_the_cond_the_variable_update_and_the_heap_write.<locals>.step.1.txt"
    ).read_text()
    assert text.startswith("# janus dump:") and "op trace" in text.splitlines()[2]
    assert "def prepare(" in text
    branches = [line for line in text.splitlines() if "tf.cond: then" in line]
    assert branches and "If(" in branches[0], text
    then_branch = branches[0].split("tf.cond: then ")[1].split(",")[0]
    assert f"def {then_branch}(" in text, "the branch's body is written out"
    assert any("AssignAddVariableOp(" in line and line.endswith("# state update") for line in text.splitlines()), text
    commit = text.split("# ---- after a successful run")[1]
    assert "setattr(a0, 'steps', V[0])" in commit, commit


def test_dump_marks_assumptions_in_the_graph(tmp_path):
    janus.config.dump_dir = str(tmp_path)

    @janus.jit
    def f(x):
        if tf.reduce_sum(x) > 0:  # always taken while profiling: speculated, checked by a JanusAssert
            return x * 3.0
        return x

    for _ in range(4):
        f(tf.constant([1.0, 2.0]))
    assert janus.stats(f)["graph_calls"] >= 1
    text = next(tmp_path.glob("*.f.1.txt")).read_text()
    asserts = [line for line in text.splitlines() if "= JanusAssert(" in line]
    assert asserts and "branch is taken" in asserts[0], text
    assert "JanusAssert #" in text.split("# ---- in-graph assumptions")[1].split("# ----")[0]


def test_dump_writes_one_tensorboard_run_per_function_and_graph(tmp_path):
    janus.config.dump_dir = str(tmp_path)
    run_differential(make_step, inputs(6))

    @janus.jit
    def other(x):
        return tf.nn.relu(x) * 3.0

    for (x,) in inputs(4):
        other(x)
    runs = sorted((tmp_path / "tensorboard").iterdir(), key=lambda p: p.name.rsplit(".", 2)[-2:])
    assert [p.name.rsplit(".", 2)[-2:] for p in runs] == [["other", "1"], ["step", "1"]], runs
    for run in runs:
        ops = {node.op for node in _graph_of_run(run).node}
        assert "Placeholder" in ops, (run, ops)
    assert "Relu" in {node.op for node in _graph_of_run(runs[0]).node}
    assert (tmp_path / f"{runs[0].name}.pbtxt").exists() and (tmp_path / f"{runs[0].name}.txt").exists()


def test_functions_with_the_same_name_get_their_own_dumps(tmp_path):
    janus.config.dump_dir = str(tmp_path)

    def make(scale: float):
        def f(x):
            return x * scale

        return janus.jit(f)

    first, second = make(2.0), make(3.0)
    for _ in range(4):
        first(tf.constant(1.0))
        second(tf.constant(1.0))
    names = sorted(p.name for p in (tmp_path / "tensorboard").iterdir())
    assert len(names) == 2 and names[1] == names[0].removesuffix(".1") + "~2.1", names
    assert "2.0" in (tmp_path / f"{names[0]}.txt").read_text() and "3.0" in (tmp_path / f"{names[1]}.txt").read_text()


def _graph_of_run(run: pathlib.Path) -> tf.compat.v1.GraphDef:
    """The graph in the run's event file (``tf.summary.graph``), read back as TensorBoard reads it."""
    (events,) = run.glob("events.out.tfevents.*")
    graphs = [e.graph_def for e in tf.compat.v1.train.summary_iterator(str(events)) if e.graph_def]
    assert len(graphs) == 1, run
    return tf.compat.v1.GraphDef.FromString(graphs[0])


def test_a_dump_that_fails_is_said_and_the_call_goes_on(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    janus.config.dump_dir = str(blocker / "dumps")  # under a file: cannot be made
    run_differential(make_step, inputs(6))
    assert any("could not dump graph 1" in r.getMessage() for r in caplog.records), caplog.records


def test_the_dump_never_runs_a_user_objects_repr(tmp_path, monkeypatch):
    calls = []

    class Config:
        scale = 2.0

        def __repr__(self):
            calls.append("repr")
            return "Config()"

    cfg = Config()

    @janus.jit
    def scaled(x):
        return x * cfg.scale

    monkeypatch.setattr(janus.config, "dump_dir", str(tmp_path))
    for _ in range(5):
        scaled(tf.constant([1.0, 2.0]))
    assert janus.stats(scaled)["graph_calls"] > 0
    text = "".join(p.read_text() for p in tmp_path.glob("*.txt"))
    assert "<Config object>" in text and calls == []
