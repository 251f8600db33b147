"""Packaging: installing janus never replaces the user's TensorFlow build, and the wheel carries the
C++ sources. A missing or old TensorFlow is reported at ``import janus`` with what to do."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import types
import venv
import zipfile
from pathlib import Path

import pytest

from janus import tfcheck

ROOT = Path(__file__).resolve().parent.parent
_TF_NAME = re.compile(r"^(tensorflow|tf-nightly|intel-tensorflow)", re.IGNORECASE)


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_no_hard_dependency_on_a_tensorflow_wheel():
    project = _project()
    assert not [d for d in project["dependencies"] if _TF_NAME.match(d)], project["dependencies"]
    extras = project["optional-dependencies"]
    assert extras["tf"] == ["tensorflow>=2.21"]
    assert extras["tf-cpu"] == ["tensorflow-cpu>=2.21"]


@pytest.mark.parametrize("version", ["2.21.0", "2.21.3", "2.22.0-rc1", "2.21.0.dev20260101", "3.0.0"])
def test_version_check_accepts(version):
    tfcheck.check(types.SimpleNamespace(__version__=version))


@pytest.mark.parametrize("version", ["2.20.1", "2.9.0", "1.15.5", "unknown"])
def test_version_check_rejects_with_what_to_do(version):
    with pytest.raises(ImportError, match=rf"TensorFlow >= 2\.21, but TensorFlow {re.escape(version)} is installed"):
        tfcheck.check(types.SimpleNamespace(__version__=version, __file__="/site/tensorflow/__init__.py"))


def test_import_without_tensorflow_says_what_to_install():
    code = "import sys; sys.modules['tensorflow'] = None; import janus"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode != 0
    assert "TensorFlowVersionError: janus needs TensorFlow >= 2.21, and none is installed" in proc.stderr
    assert "janus-tf[tf-cpu]" in proc.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, env={**os.environ, "PIP_NO_INPUT": "1"})
    (found,) = out.glob("janus_tf-*.whl")
    return found


def test_wheel_carries_csrc_and_requires_no_tensorflow(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
    for source in (ROOT / "csrc").glob("*.cc"):
        assert f"janus/ops/csrc/{source.name}" in names
    requires = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]
    unconditional = [r for r in requires if "extra ==" not in r]
    assert sorted(unconditional) == ["gast>=0.6", "numpy>=1.26"], requires
    assert 'tensorflow>=2.21; extra == "tf"' in requires
    assert 'tensorflow-cpu>=2.21; extra == "tf-cpu"' in requires


def _fake_installed(site: Path, name: str, version: str) -> None:
    """A distribution pip sees as installed (metadata only): stands in for big wheels not downloaded."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text("")


def test_wheel_installs_next_to_tensorflow_cpu_without_pulling_tensorflow(wheel, tmp_path):
    """A fresh venv holding tensorflow-cpu (its metadata: the real wheel is not downloaded here):
    pip, with no index to pull anything from, installs janus alone, and ``pip check`` is clean."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                       check=True, capture_output=True, text=True).stdout.strip()
    )  # fmt: skip
    for name, version in [("tensorflow-cpu", "2.21.0"), ("numpy", "2.4.6"), ("gast", "0.7.0")]:
        _fake_installed(site, name, version)
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # a checkout's egg-info would count as janus
    report = tmp_path / "report.json"
    dry = subprocess.run([*pip, "install", "--dry-run", "--no-index", "--report", str(report), str(wheel)],
                         capture_output=True, text=True, env=env)  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    installed = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    assert installed == ["janus-tf"]
    subprocess.run([*pip, "install", "-q", "--no-index", str(wheel)], check=True, capture_output=True, env=env)
    check = subprocess.run([*pip, "check"], capture_output=True, text=True, env=env)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "No broken requirements found" in check.stdout
