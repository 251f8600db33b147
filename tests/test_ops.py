"""The C++ op build and JanusAssert."""

import pytest
import tensorflow as tf

from janus.ops import build, failed_assumption_id, janus_assert


def test_janus_assert_passes_and_fails_with_its_id():
    @tf.function(autograph=False)
    def checked(x):
        janus_assert(x > 0, 42)
        return x * 2

    assert float(checked(tf.constant(3.0))) == 6.0
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        checked(tf.constant(-1.0))
    assert failed_assumption_id(info.value) == 42


def test_real_errors_are_not_assumption_failures():
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        tf.gather(tf.constant([1, 2]), 5)
    assert failed_assumption_id(info.value) is None
    assert failed_assumption_id(ValueError("JANUS_ASSUMPTION_FAILED:3:")) is None


def test_janus_assert_requires_scalar():
    @tf.function(autograph=False)
    def bad(x):
        janus_assert(x, 1)

    with pytest.raises(ValueError):
        bad.get_concrete_function(tf.TensorSpec([2], tf.bool))


def test_library_cache_is_keyed_by_tf_version_and_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("JANUS_CACHE_DIR", str(tmp_path))
    sources = sorted(build.source_dir().glob("*.cc"))
    path = build._library_path(sources)
    assert path.parent.parent == tmp_path
    assert f"tf{tf.__version__}" in path.parent.name


def test_missing_compiler_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("JANUS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CXX", "")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(build.OpBuildError, match="C\\+\\+17 compiler"):
        build.load()


def test_compile_error_is_reported(tmp_path, monkeypatch):
    bad = tmp_path / "src"
    bad.mkdir()
    (bad / "broken.cc").write_text("this is not C++;\n")
    monkeypatch.setenv("JANUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "source_dir", lambda: bad)
    with pytest.raises(build.OpBuildError, match="could not compile"):
        build.load()
