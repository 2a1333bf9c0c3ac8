#!/usr/bin/env bash
# Run the Python client's tests (and any extra pytest paths given, such as
# deploy/tests) in a venv:
# the venv is made once, the client is installed into it (which generates
# the stubs from proto/), then pytest runs against the installed package.
#
# Needs the debug binaries (cargo build --workspace); FLUXGATE_BIN_DIR
# points elsewhere.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${FLUXGATE_PY_VENV:-$here/.venv}
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
py=$venv/bin/python
"$py" -m pip install -q --disable-pip-version-check \
    setuptools grpcio grpcio-tools protobuf pytest pyyaml kubernetes-validate
# No build isolation: the venv already holds grpcio-tools, so nothing more
# is downloaded, and the stubs come from the same protobuf that runs them.
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps "$here"
# Extra test paths are the caller's: made absolute before the cd below.
args=()
for a in "$@"; do
    if [ -e "$a" ]; then args+=("$(realpath "$a")"); else args+=("$a"); fi
done
# From outside the source tree, so that the installed package is the one tested.
cd "$here/tests"
exec "$venv/bin/pytest" -q -p no:cacheprovider "$here/tests" ${args[@]+"${args[@]}"}
