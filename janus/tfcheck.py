"""The TensorFlow janus runs on: checked at ``import janus``, never installed by janus itself.

janus has no pip dependency on a TensorFlow wheel name, so installing it never replaces the user's
build (``tensorflow``, ``tensorflow-cpu``, a vendor or source build). The extras ``janus-tf[tf]``
and ``janus-tf[tf-cpu]`` install one for users who have none. Any build reports ``tf.__version__``,
so the check is on that, with a message that says what to do.
"""

from __future__ import annotations

import re
from types import ModuleType

MINIMUM = (2, 21)
_INSTALL_HINT = (
    "janus never installs TensorFlow itself, so it cannot replace your build: install the one you use "
    "(`pip install tensorflow`, `pip install tensorflow-cpu`, a vendor build), or install janus with one "
    "(`pip install 'janus-tf[tf]'` or `'janus-tf[tf-cpu]'`)."
)


class TensorFlowVersionError(ImportError):
    """TensorFlow is missing or older than janus supports."""


def parse(version: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a TF version string (``2.21.0``, ``2.22.0-rc1``, ``2.21.0.dev20260101``)."""
    match = re.match(r"\s*(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def check(tf: ModuleType) -> None:
    """Raises ``TensorFlowVersionError`` unless ``tf`` is TensorFlow >= ``MINIMUM``."""
    version = str(getattr(tf, "__version__", "unknown"))
    parsed = parse(version)
    if parsed is None or parsed < MINIMUM:
        where = getattr(tf, "__file__", None) or "an unknown location"
        raise TensorFlowVersionError(
            f"janus needs TensorFlow >= {MINIMUM[0]}.{MINIMUM[1]}, but TensorFlow {version} is installed "
            f"(at {where}). Upgrade it with the same package you installed it with, e.g. "
            f"`pip install -U tensorflow-cpu` or `pip install -U tensorflow`."
        )


def require() -> ModuleType:
    """Imports TensorFlow and checks its version; a missing one is reported with what to install."""
    try:
        import tensorflow as tf
    except ModuleNotFoundError as err:
        if err.name != "tensorflow":
            raise  # TensorFlow is there but broken: its own error says more than ours would
        raise TensorFlowVersionError(
            f"janus needs TensorFlow >= {MINIMUM[0]}.{MINIMUM[1]}, and none is installed. {_INSTALL_HINT}"
        ) from None
    check(tf)
    return tf
