#!/usr/bin/env bash
# Builds Horovod 0.28.1 from its PyPI sdist against the TensorFlow in .venv and installs it there.
#
# Horovod 0.28.1 does not build as-is against TF 2.21: horovod/tensorflow/xla_mpi_ops.cc (GPU
# XLA only) includes XLA headers the TF wheel does not ship. The recipe removes that file from
# TF_SOURCES and builds with Gloo, without MPI, PyTorch and MXNet. The wheel is cached per TF
# version, so a re-run only reinstalls it. Nothing from Horovod's source enters this repo.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
VERSION=0.28.1

for tool in g++ cmake; do
  if ! command -v "$tool" >/dev/null; then
    echo "make horovod: '$tool' is missing. Install a C++17 compiler and CMake 3.x (apt-get install g++ cmake)." >&2
    exit 1
  fi
done
cmake_major=$(cmake --version | head -1 | sed -E 's/[^0-9]*([0-9]+)\..*/\1/')
if [ "$cmake_major" -ge 4 ]; then
  echo "make horovod: CMake $(cmake --version | head -1) is too new: Gloo's CMakeLists needs CMake < 4." >&2
  exit 1
fi

tf_version=$($PY -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)
cache="${JANUS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/janus}/horovod-$VERSION-tf$tf_version"
wheel=$(ls "$cache"/horovod-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  $PY -m pip download -q --no-deps --no-binary :all: "horovod==$VERSION" -d "$work"
  tar -xzf "$work/horovod-$VERSION.tar.gz" -C "$work"
  src="$work/horovod-$VERSION"
  sed -i '/xla_mpi_ops.cc/d' "$src/horovod/tensorflow/CMakeLists.txt"
  echo "make horovod: building Horovod $VERSION against TensorFlow $tf_version (about 6 minutes on 2 cores)"
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_PYTORCH=1 \
    HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS="-j$(nproc)" \
    $PY -m pip wheel -q --no-deps --no-build-isolation -w "$work/dist" "$src"
  mkdir -p "$cache"
  cp "$work"/dist/horovod-*.whl "$cache/"
  wheel=$(ls "$cache"/horovod-*.whl | head -1)
fi
$PY -m pip install -q --no-deps "$wheel" cloudpickle psutil pyyaml packaging
$PY -c 'import horovod.tensorflow as hvd; print("horovod", hvd.__version__ if hasattr(hvd, "__version__") else "ok")'
