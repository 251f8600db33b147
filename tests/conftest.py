import os
import resource

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


# Two test processes share a 24 GiB machine: a test whose process peaks this much above where it
# started fails, naming itself, before the suite is killed for memory in some other test.
_PEAK_GROWTH_LIMIT_MIB = 2048


@pytest.fixture(autouse=True)
def bounded_peak_memory(request):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024  # KiB on Linux
    yield
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024 - before
    if grown > _PEAK_GROWTH_LIMIT_MIB:
        pytest.fail(
            f"{request.node.nodeid} raised its process's peak memory by {grown} MiB (limit "
            f"{_PEAK_GROWTH_LIMIT_MIB}): make its tensors smaller (TF keeps freed memory for reuse)",
            pytrace=False,
        )
