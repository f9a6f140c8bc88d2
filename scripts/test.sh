#!/bin/sh
# `make test` after the venv and the containerd/toolkit set-up: lint, types, shell scripts,
# the docs site, then the suite. The real Pulumi engine and the Kubernetes control plane
# (scripts/build-oracles.sh ENGINE_BUILDS) are the longest builds; they compile in the
# background, and the engine's tests (`-m engine`) start as soon as they are built, beside
# the rest of the suite. Each tier is one pytest process, mostly on one core: side by side
# they take about as long as the longer one, not the sum. With the builds cached the
# engine's tests start at once. The engine tier's output is printed when both are done.
#
#   ENGINE_BUILDS="pulumi-3.260.0 ..." sh scripts/test.sh [PYTEST_ARGS...]
set -u
BIN=${BIN:-.venv/bin}
CACHE=${GPUPLANE_CACHE:-$HOME/.cache/gpuplane}
log=$CACHE/engine-build.log
mkdir -p "$CACHE"
engine_log=$(mktemp "${TMPDIR:-/tmp}/gpuplane-engine-tier.XXXXXX")
engine_rc=$engine_log.rc
(
    # shellcheck disable=SC2086  # one word per build
    sh scripts/build-oracles.sh $ENGINE_BUILDS >"$log" 2>&1; built=$?
    cat "$log"
    if [ "$built" -ne 0 ]; then
        echo "test: the engine builds failed: the engine's tests fail (GPUPLANE_REQUIRE_REAL) or skip"
    fi
    "$BIN/python" -m pytest -m engine "$@"; ran=$?
    # 5: PYTEST_ARGS selected none of the engine's tests.
    if { [ "$ran" -eq 0 ] || [ "$ran" -eq 5 ]; } && [ "$built" -eq 0 ]; then
        echo 0 >"$engine_rc"
    else
        echo 1 >"$engine_rc"
    fi
) >"$engine_log" 2>&1 </dev/null &
engine=$!
# A stopped `make test` (Ctrl-C, a CI timeout) stops the engine tier too.
trap 'pkill -TERM -P "$engine" 2>/dev/null; kill "$engine" 2>/dev/null
      rm -f "$engine_log" "$engine_rc"; exit 130' INT TERM
status=0
"$BIN/ruff" check . || status=1
"$BIN/mypy" || status=1
sh scripts/shellcheck.sh || status=1
"$BIN/mkdocs" build --strict --quiet --site-dir site || status=1
"$BIN/python" -m pytest -m "not engine" "$@" || status=1
echo "test: waiting for the engine builds and the engine's tests ($engine_log)"
wait "$engine"
trap - INT TERM
echo "test: the engine tier (scripts/build-oracles.sh $ENGINE_BUILDS; pytest -m engine):"
cat "$engine_log"
[ "$(cat "$engine_rc" 2>/dev/null)" = 0 ] || status=1
rm -f "$engine_log" "$engine_rc"
exit "$status"
