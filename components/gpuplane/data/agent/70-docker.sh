# ---------------------------------------------------------------------------------------
# Docker's daemon.json: a plan's one file outside containerd, with its own check and its
# own single restart. Which file and how to restart come from the plan, else from the
# state (a plan that no longer has it, restore).

gp_docker_select() {
	GP_DOCKER_FILE=${P_DOCKER_CONFIG:-$S_DOCKER_CONFIG}
	GP_DOCKER_RESTART=${GP_OPT_DOCKER_RESTART:-${P_DOCKER_RESTART:-$S_DOCKER_RESTART}}
	GP_DOCKER_WANT=$P_DOCKER_RUNTIME
}

# gp_docker_touched LIST: does LIST (node paths) hold Docker's file? gp_ctd_touched LIST:
# does it hold any other (a containerd file)?
gp_docker_touched() { [ -n "$GP_DOCKER_FILE" ] && grep -q -x -F -e "$GP_DOCKER_FILE" "$1"; }
gp_ctd_touched() { grep -v -x -F -e "${GP_DOCKER_FILE:-/dev/null/none}" "$1" | grep -q .; }

# gp_docker_validate FILE: would dockerd start on FILE? `dockerd --validate` (Docker >= 23)
# where the node's dockerd has it; else a JSON syntax check with python3, which cannot
# see unknown keys or bad values; else none. GP_DOCKER_CHECK says which ran.
gp_docker_validate() {
	if [ ! -e "$1" ]; then
		GP_DOCKER_CHECK="none needed: the node has no daemon.json (Docker's defaults)"
		return 0
	fi
	gp_dv_bin=${GP_OPT_DOCKERD:-$(command -v dockerd 2>/dev/null)}
	gp_dv_why="no dockerd on PATH"
	if [ -n "$gp_dv_bin" ] && [ ! -x "$gp_dv_bin" ]; then
		gp_dv_why="no dockerd at $gp_dv_bin"
		gp_dv_bin=
	fi
	if [ -n "$gp_dv_bin" ]; then
		if "$gp_dv_bin" --help </dev/null 2>&1 | grep -q -e '--validate'; then
			if "$gp_dv_bin" --validate --config-file "$1" </dev/null >"$GP_STAGE/docker-validate.out" 2>&1; then
				GP_DOCKER_CHECK="dockerd --validate ($gp_dv_bin)"
				return 0
			fi
			GP_DOCKER_ERR="dockerd --validate refuses it: $(tail -n 2 "$GP_STAGE/docker-validate.out" | tr '\n' ' ')"
			return 1
		fi
		gp_dv_why="$gp_dv_bin has no --validate (Docker < 23: $("$gp_dv_bin" --version </dev/null 2>/dev/null | head -n 1))"
	fi
	if command -v python3 >/dev/null 2>&1; then
		if python3 -c 'import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8-sig"))
sys.exit(0 if isinstance(d, dict) else "not a JSON object")' "$1" </dev/null >"$GP_STAGE/docker-validate.out" 2>&1; then
			GP_DOCKER_CHECK="JSON syntax only, with python3 ($gp_dv_why): keys and values are not checked"
			return 0
		fi
		GP_DOCKER_ERR="it is not a JSON object (python3: $(tail -n 1 "$GP_STAGE/docker-validate.out"))"
		return 1
	fi
	GP_DOCKER_CHECK="NONE: $gp_dv_why and no python3; only Docker's restart will tell"
	return 0
}

# gp_docker_ready_once: Docker answers and (GP_DOCKER_WANT) lists that runtime.
gp_docker_ready_once() {
	if [ -n "$GP_OPT_DOCKER_READY" ]; then
		gp_run_bounded "$GP_READY_TIMEOUT" "$GP_STAGE/docker-ready.out" "$GP_OPT_DOCKER_READY" || {
			GP_DOCKER_ERR="'$GP_OPT_DOCKER_READY' failed: $(tail -n 2 "$GP_STAGE/docker-ready.out" | tr '\n' ' ')"
			return 1
		}
	elif command -v docker >/dev/null 2>&1; then
		# shellcheck disable=SC2016 # a Go template, not shell
		docker info --format '{{json .Runtimes}}' </dev/null >"$GP_STAGE/docker-ready.out" 2>&1 || {
			GP_DOCKER_ERR="docker info: $(tail -n 2 "$GP_STAGE/docker-ready.out" | tr '\n' ' ')"
			return 1
		}
	else
		gp_say "no docker CLI on this node: Docker's restart command succeeding is all that is checked"
		return 0
	fi
	[ -z "$GP_DOCKER_WANT" ] && return 0
	grep -q -F -e "\"$GP_DOCKER_WANT\"" "$GP_STAGE/docker-ready.out" && return 0
	GP_DOCKER_ERR="Docker serves but does not list the '$GP_DOCKER_WANT' runtime: $(head -c 300 "$GP_STAGE/docker-ready.out")"
	return 1
}

# gp_docker_restart: restart Docker once and wait until it serves.
gp_docker_restart() {
	if [ -z "$GP_DOCKER_RESTART" ]; then
		GP_DOCKER_ERR="no Docker restart command (the plan has none; pass --docker-restart-cmd)"
		return 1
	fi
	gp_say "restarting Docker: $GP_DOCKER_RESTART"
	GP_DOCKER_RESTARTED=1
	GP_NODE_TOUCHED=1
	if ! gp_run_bounded "$GP_RESTART_TIMEOUT" "$GP_STAGE/docker-restart.out" "$GP_DOCKER_RESTART"; then
		GP_DOCKER_ERR="'$GP_DOCKER_RESTART' failed: $(tail -n 3 "$GP_STAGE/docker-restart.out" | tr '\n' ' ')"
		return 1
	fi
	gp_now_ms
	gp_dr_end=$((GP_MS + GP_READY_TIMEOUT * 1000))
	while ! gp_docker_ready_once; do
		gp_now_ms
		[ "$GP_MS" -ge "$gp_dr_end" ] && return 1
		gp_sleep
	done
	return 0
}

# gp_docker_check, gp_docker_apply_restart: the part of an apply or restore that is
# Docker's, when the run changed its file: check the file before anything restarts, then
# (after containerd's part) restart Docker once, with the journal marking it, so that a
# rollback or a recovery restarts Docker again on the restored file.
gp_docker_check() {
	gp_docker_validate "$GP_ROOT$GP_DOCKER_FILE" ||
		gp_fail 1 "Docker would refuse $GP_DOCKER_FILE as this run leaves it: $GP_DOCKER_ERR; nothing was restarted"
	gp_say "checked $GP_DOCKER_FILE: $GP_DOCKER_CHECK"
}

gp_docker_apply_restart() {
	if ! { : >"$GP_TXN/docker-restarting" && gp_fsync "$GP_TXN"; }; then
		gp_fail 1 "cannot write the journal's Docker phase under $GP_TXN"
	fi
	gp_step docker-restart
	gp_docker_restart || gp_fail 1 "Docker did not come back on $GP_DOCKER_FILE: $GP_DOCKER_ERR"
	gp_step docker-restarted
}

