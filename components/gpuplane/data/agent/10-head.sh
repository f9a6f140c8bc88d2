#!/bin/sh
# gpuplane node agent: change a node's containerd configuration without ever leaving
# containerd worse than it was found.
#
#   apply    write the planned files (the plan follows this script on stdin, in the
#            program components/gpuplane/agent/script.py builds), check the merged config with the
#            node's own `containerd config dump`, restart containerd only when the
#            effective config changed, wait until the CRI answers; on any failure put
#            every file back, restart again if it had restarted, and exit non-zero.
#            A plan may also carry Docker's daemon.json (`docker_config`): it is written
#            in the same transaction, checked with `dockerd --validate` (Docker >= 23;
#            else a JSON syntax check with python3, and the output says which ran)
#            before anything restarts, and Docker is restarted once, after containerd,
#            only when that file changed, then must list the nvidia runtime; a Docker
#            that does not come back rolls the whole run back. Restore puts its original
#            bytes back (or removes it) and restarts Docker the same way.
#   status   one JSON object: effective runtimes, default runtime, sha256 of the
#            effective config, drift from what was applied.
#   restore  put back the originals gpuplane replaced (byte-exact; files it created are
#            removed), restart only if the effective config changed, check that runc
#            serves and that nvidia is not left as the default runtime.
#
# A plan may also mask host systemd units (`mask_unit`: nvidia-imex.service beside the
# DRA driver's ComputeDomains). Apply records each unit's state as found, then stops,
# disables and masks it, before any containerd file changes; restore, a failed apply, and
# an apply whose plan no longer masks it put exactly that state back (85-units.sh).
#
# Plain POSIX sh plus coreutils or busybox (sha256sum, awk, sed, mktemp, readlink). Runs
# as root. Every path may be placed under a stand-in root (--root DIR) and the restart,
# readiness and containerd commands can be replaced, so tests drive it against real
# containerd daemons. State, backups and the lock live in <root>/var/lib/gpuplane.
#
# Before it writes anything, apply checks the plan's bases: the node's original of every
# file the plan was made from (the files it writes, the top-level config) must be the one
# the plan assumed, and a file gpuplane manages must still be as gpuplane wrote it (FM05).
# Otherwise applying would replace settings the plan never saw, so it refuses.
#
# Crash consistency: before anything on the node changes, a journal (the node files the
# run may touch and a snapshot of gpuplane's own state) is written, flushed and renamed
# into place, and the originals a later restore needs are kept; a run killed at any point
# is undone by the next run of either mode (gp_recover). Restart and readiness commands
# run with time limits. GPUPLANE_AGENT_FAILPOINT=MODE:STEP (tests only) kills the agent
# with SIGKILL at that step boundary (gp_step).
#
# Exit codes: 0 done; 1 refused or failed with the node unchanged ("nothing was changed":
# e.g. gpuplane's state dir full or read-only) or rolled back to what it was; 2 refused
# before any change (bad plan, wrong node, broken current config, foreign or changed files,
# a file the plan was not made from); 3 the node could not be put back and a person has to
# look: the message names each file, what it holds and what it held before.
#
# This file is generated from the parts in components/gpuplane/data/agent/ (joined by
# `python -m gpuplane.agent.parts`): edit those, then regenerate it.

GP_AGENT_VERSION=2
GP_PROG=gpuplane-agent
GP_NL='
'
GP_TAB='	'

gp_usage() {
	cat <<'EOF_USAGE'
usage: sh agent.sh MODE [options]    (apply: the program from apply_stdin, on stdin)
modes: apply | status | restore | help
  --root DIR            directory standing in for / (tests, chroots)
  --containerd PATH     containerd binary used for `config dump` (default: the plan's)
  --ctr PATH            ctr binary for the default readiness check
  --address SOCKET      socket the readiness check dials (default: the plan's, under --root)
  --restart-cmd CMD     command that restarts containerd (default: the plan's)
  --ready-cmd CMD       command that succeeds once the CRI serves (default: crictl info,
                        else the cri plugin's status in `ctr plugins ls`)
  --ready-timeout SEC   how long to wait for the CRI after a restart (default 120)
  --restart-timeout SEC how long the restart command may run before it is stopped and
                        the run rolled back (default 180)
  --lock-timeout SEC    how long to wait for another run of the agent (default 600)
  --plan-id ID          restore only if ID is the plan applied last (replacement-safe delete)
  --dockerd PATH        dockerd binary that validates daemon.json (default: dockerd on PATH)
  --docker-restart-cmd CMD  command that restarts Docker (default: the plan's)
  --docker-ready-cmd CMD    command that succeeds once Docker serves, printing its runtimes
                        (default: docker info --format '{{json .Runtimes}}')
EOF_USAGE
}

gp_say() { printf '%s: %s\n' "$GP_PROG" "$*" >&2; }

# ---------------------------------------------------------------------------------------
# Exit handling: the stage dir goes, the lock is released; an interrupted transaction is
# rolled back when a signal arrives (SIGKILL cannot be caught: the journal covers that).

gp_on_exit() {
	[ -n "${GP_STAGE:-}" ] && rm -rf "$GP_STAGE"
	gp_unlock
	[ -n "${GP_STATE:-}" ] && rmdir "$GP_STATE" 2>/dev/null
	:
}

gp_on_signal() {
	trap '' INT TERM HUP
	gp_units_undo
	if [ "${GP_TXN_OPEN:-0}" = 1 ]; then
		gp_say "interrupted by SIG$1: restoring the files changed so far"
		gp_rollback
		gp_finish_fail "interrupted by SIG$1"
	fi
	exit 130
}

# gp_fail CODE MESSAGE: end the run. With an open transaction the node is restored first
# and the message says so.
gp_fail() {
	gp_fail_code=$1
	shift
	gp_units_undo # the units this apply masked, as they were
	if [ "${GP_TXN_OPEN:-0}" = 1 ]; then
		gp_say "$*"
		gp_rollback
		if [ -n "$GP_UNITS_ERR" ]; then
			GP_ROLLBACK_OK=0
			GP_ROLLBACK_ERR="${GP_ROLLBACK_ERR:+$GP_ROLLBACK_ERR; }$GP_UNITS_ERR"
		fi
		gp_finish_fail "$*"
	fi
	gp_say "$*"
	if [ -n "$GP_UNITS_ERR" ]; then
		gp_say "RESTORE INCOMPLETE: $GP_UNITS_ERR"
		gp_json_result false "$*; restore incomplete: $GP_UNITS_ERR" false
		exit 3
	fi
	gp_json_result false "$*" "${gp_fail_restored:-}"
	exit "$gp_fail_code"
}

gp_finish_fail() {
	if [ "$GP_ROLLBACK_OK" = 1 ] && [ "${GP_NODE_TOUCHED:-0}" != 1 ]; then
		gp_say "nothing was changed on the node"
		gp_json_result false "$1; nothing was changed" true
		exit 1
	fi
	if [ "$GP_ROLLBACK_OK" = 1 ]; then
		gp_say "the node was restored to its previous files${GP_ROLLBACK_NOTE}"
		gp_json_result false "$1" true
		exit 1
	fi
	gp_say "RESTORE INCOMPLETE: $GP_ROLLBACK_ERR; backups are in $GP_TXN"
	gp_json_result false "$1; restore incomplete: $GP_ROLLBACK_ERR" false
	exit 3
}

