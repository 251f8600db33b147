import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

import janus  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "keras: uses Keras; CI runs it under Keras 3 and Keras 2 (tf_keras)")
    config.addinivalue_line(
        "markers",
        "slow: a soak or long-running test (over ~15 s): make test runs it; `make test SKIP_SLOW=1` (CI on "
        "Python 3.12 and 3.13) leaves it out",
    )


@pytest.fixture(autouse=True)
def fresh_janus_config():
    saved = {k: getattr(janus.config, k) for k in janus.Config.__dataclass_fields__}
    yield
    for k, v in saved.items():
        setattr(janus.config, k, v)


@pytest.fixture
def split_only():
    """For tests of the split itself: no statement runs after a whole graph, or between a prefix
    graph and a whole one, instead (``janus.graphgen.later``, ``janus.partial.recompute``;
    tests/test_later_statements.py and tests/test_recompute.py run such programs those ways)."""
    janus.config.later_statements = False
    janus.config.recompute_prefix = False
