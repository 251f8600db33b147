"""The README's user-facing claims: its quickstart is examples/quickstart.py and prints what the
README says, and its table of refusal kinds covers every kind janus reports."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from janus.graphgen import errors

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _section(title: str) -> str:
    start = README.index(f"\n## {title}")
    end = README.find("\n## ", start + 1)
    return README[start:end]


def test_quickstart_is_the_example():
    block = re.search(r"```python\n(.*?)```", _section("Quickstart"), re.S).group(1)
    assert block == (ROOT / "examples" / "quickstart.py").read_text()


def test_quickstart_prints_what_the_readme_says():
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for claim in ("'calls': 50", "'graph_calls': 47", "'profiled_calls': 3"):
        assert claim in proc.stdout and claim in _section("Quickstart"), (claim, proc.stdout)


def _reported_kinds() -> set[str]:
    kinds = set(errors.KINDS.values()) | {errors.NeedsStaticShape.kind, errors.RaisesHere.kind}
    driver = (ROOT / "janus" / "driver.py").read_text()
    kinds |= set(re.findall(r'_go_imperative\([^\n]*, "([a-z ]+)"\)', driver))
    kinds |= set(re.findall(r'self\.imperative_kind = "([a-z ]+)"', driver))
    return kinds


def test_every_refusal_kind_has_a_row():
    table = _section("When janus does nothing, and why")
    kinds = _reported_kinds()
    assert {"graph error", "max graphs", "internal error", "construct", "library call"} <= kinds
    missing = [k for k in sorted(kinds) if f"`{k}`" not in table]
    assert not missing, f"README 'When janus does nothing, and why' lacks the kinds {missing}"
