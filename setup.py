"""setuptools shim: ships csrc/ inside the package so installed copies can build their ops."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithSources(build_py):
    """Copies csrc/*.cc into janus/ops/csrc of the build, for non-editable installs."""

    def run(self):
        super().run()
        target = Path(self.build_lib) / "janus" / "ops" / "csrc"
        target.mkdir(parents=True, exist_ok=True)
        for source in Path(__file__).parent.joinpath("csrc").glob("*.cc"):
            shutil.copy(source, target / source.name)


setup(cmdclass={"build_py": BuildPyWithSources})
