#!/usr/bin/env bash
# The wheels gpu-round.sh's `wheel` phase needs on a machine without network: pip itself and the
# build requirements of pyproject.toml (scikit-build-core, pybind11 and theirs), pure Python, for
# the GPU machine's interpreter (default 3.12), into .wh/ (ignored by git; carry it to the run).
#   tools/bench/wheelhouse.sh [PYTHON_VERSION]
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .wh
python3 -m pip download -q --only-binary=:all: --python-version "${1:-3.12}" \
  --platform manylinux2014_x86_64 --implementation cp -d .wh \
  "scikit-build-core>=0.10" "pybind11>=2.10" pip
ls .wh
