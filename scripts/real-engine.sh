#!/bin/sh
# Run one Pulumi operation of any Python Pulumi project under the Pulumi CLI and the
# kubernetes provider built by scripts/build-oracles.sh, the way the engine tests start
# programs (tests/support/real_engine.py, on tests/support/pulumi_engine.py; see
# docs/real-engine.md). The last line of output is one JSON object: ok, violations,
# diagnostics, changes. Exit 0: the operation succeeded; 1: it failed; 2: bad usage.
#
#   sh scripts/real-engine.sh OP PROJECT_DIR STACK [--policy-pack DIR]
#       [--policy-config FILE] [--control-plane] [--state DIR] [--timeout SECONDS]
#
# The Python that runs the program and the pack: $PYTHON, else the checkout's
# .venv/bin/python, else python3; it needs the Pulumi SDKs (requirements.lock). The
# checkout's components/ come first on its path, as in the tests, unless
# GPUPLANE_FROM_CHECKOUT=0 (then gpuplane is the one installed in that Python).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${PYTHON:-}" ]; then
    python=$PYTHON
elif [ -x "$repo/.venv/bin/python" ]; then
    python=$repo/.venv/bin/python
else
    python=python3
fi
path=$repo/tests
if [ "${GPUPLANE_FROM_CHECKOUT:-1}" != 0 ]; then
    path=$repo/components:$path
fi
PYTHONPATH=$path${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH
exec "$python" -m support.real_engine "$@"
