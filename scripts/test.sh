#!/bin/sh
# `make test` after the venv and the containerd/toolkit set-up: lint, types, shell scripts,
# the docs site, then the suite. The real Pulumi engine and the Kubernetes control plane
# (scripts/build-oracles.sh ENGINE_BUILDS) are the longest builds; on a fresh machine they
# compile in the background while the rest of the suite runs (which leaves a core idle
# most of the time), and the engine's tests (`-m engine`) run once they are built. With
# the builds cached this costs nothing.
#
#   ENGINE_BUILDS="pulumi-3.260.0 ..." sh scripts/test.sh [PYTEST_ARGS...]
set -u
BIN=${BIN:-.venv/bin}
CACHE=${GPUPLANE_CACHE:-$HOME/.cache/gpuplane}
log=$CACHE/engine-build.log
mkdir -p "$CACHE"
# shellcheck disable=SC2086  # one word per build
sh scripts/build-oracles.sh $ENGINE_BUILDS >"$log" 2>&1 &
builder=$!
status=0
"$BIN/ruff" check . || status=1
"$BIN/mypy" || status=1
sh scripts/shellcheck.sh || status=1
"$BIN/mkdocs" build --strict --quiet --site-dir site || status=1
"$BIN/python" -m pytest -m "not engine" "$@" || status=1
echo "test: waiting for the engine builds ($log)"
wait "$builder"; built=$?
cat "$log"
if [ "$built" -ne 0 ]; then
    echo "test: the engine builds failed: the engine's tests fail (GPUPLANE_REQUIRE_REAL) or skip" >&2
fi
"$BIN/python" -m pytest -m engine "$@"; ran=$?
# 5: PYTEST_ARGS selected none of the engine's tests.
[ "$ran" -eq 0 ] || [ "$ran" -eq 5 ] || status=1
[ "$built" -eq 0 ] || status=1
exit "$status"
