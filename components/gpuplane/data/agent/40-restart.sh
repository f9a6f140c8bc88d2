# ---------------------------------------------------------------------------------------
# Restart and readiness

gp_restart() {
	if [ -z "$GP_RESTART" ]; then
		GP_RESTART_ERR="no restart command (the plan has none; pass --restart-cmd)"
		return 1
	fi
	gp_say "restarting containerd: $GP_RESTART"
	gp_now_ms
	gp_rs_t0=$GP_MS
	GP_RESTARTED=1
	GP_NODE_TOUCHED=1
	if ! gp_run_bounded "$GP_RESTART_TIMEOUT" "$GP_STAGE/restart.out" "$GP_RESTART"; then
		if [ "$GP_BOUNDED_HUNG" = 1 ]; then
			GP_RESTART_ERR="the restart command '$GP_RESTART' hung: it did not finish within ${GP_RESTART_TIMEOUT}s (--restart-timeout) and was stopped"
		else
			GP_RESTART_ERR="'$GP_RESTART' failed: $(tail -n 3 "$GP_STAGE/restart.out" | tr '\n' ' ')"
		fi
		return 1
	fi
	gp_now_ms
	GP_T_RESTART=$((GP_MS - gp_rs_t0))
	if ! gp_wait_ready; then
		GP_RESTART_ERR="the CRI did not answer within ${GP_READY_TIMEOUT}s after the restart ($GP_READY_ERR)"
		return 1
	fi
	gp_now_ms
	GP_T_READY=$((GP_MS - gp_rs_t0))
	return 0
}

# gp_run_bounded SECONDS OUT COMMAND: run COMMAND (sh -c, output to OUT) for at most
# SECONDS; past that it and its children are stopped (TERM, then KILL) and
# GP_BOUNDED_HUNG=1. A hung `systemctl restart` must not hold the node's lock, and
# `pulumi up`, forever.
gp_run_bounded() {
	GP_BOUNDED_HUNG=0
	gp_rb_polls=0
	rm -f "$2.pid" "$2.rc"
	(
		sh -c 'echo $$ >"$1"; exec sh -c "$2"' gp-bounded "$2.pid" "$3" </dev/null >"$2" 2>&1
		echo $? >"$2.rc"
	) &
	gp_rb_sub=$!
	gp_now_ms
	gp_rb_end=$((GP_MS + $1 * 1000))
	while [ ! -f "$2.rc" ]; do
		gp_now_ms
		if [ "$GP_MS" -ge "$gp_rb_end" ]; then
			GP_BOUNDED_HUNG=1
			gp_rb_pid=$(cat "$2.pid" 2>/dev/null)
			if [ -n "$gp_rb_pid" ]; then
				gp_kill_tree TERM "$gp_rb_pid"
				sleep 1
				gp_kill_tree KILL "$gp_rb_pid"
			fi
			wait "$gp_rb_sub" 2>/dev/null
			return 124
		fi
		# poll finely while a quick command is likely to finish, then every 0.1 s
		gp_rb_polls=$((${gp_rb_polls:-0} + 1))
		if [ "$gp_rb_polls" -le 25 ]; then sleep 0.02 2>/dev/null || sleep 1; else gp_sleep; fi
	done
	gp_rb_polls=0
	wait "$gp_rb_sub" 2>/dev/null
	return "$(cat "$2.rc")"
}

# gp_kill_tree SIGNAL PID: signal PID and its descendants (found from /proc/*/stat; a
# process that exits meanwhile is no error).
gp_kill_tree() {
	gp_kt_sig=$1
	gp_kt_todo=$2
	gp_kt_all=
	gp_kt_depth=0
	while [ -n "$gp_kt_todo" ] && [ "$gp_kt_depth" -lt 16 ]; do
		gp_kt_next=
		for gp_kt_parent in $gp_kt_todo; do
			gp_kt_all="$gp_kt_all $gp_kt_parent"
			gp_kt_next="$gp_kt_next $(gp_children "$gp_kt_parent")"
		done
		# shellcheck disable=SC2086,SC2116 # unquoted echo squeezes the list to single spaces
		gp_kt_todo=$(echo $gp_kt_next)
		gp_kt_depth=$((gp_kt_depth + 1))
	done
	for gp_kt in $gp_kt_all; do
		kill -s "$gp_kt_sig" "$gp_kt" 2>/dev/null
	done
	:
}

gp_children() { # PID: the pids whose parent it is
	gp_ch_of=$1
	for gp_ch in /proc/[0-9]*/stat; do
		{ read -r gp_ch_line <"$gp_ch"; } 2>/dev/null || continue
		gp_ch_rest=${gp_ch_line##*) }
		# shellcheck disable=SC2086
		set -- $gp_ch_rest
		[ "${2:-}" = "$gp_ch_of" ] || continue
		gp_ch=${gp_ch#/proc/}
		printf '%s\n' "${gp_ch%/stat}"
	done
}

gp_ready_once() {
	if [ -n "$GP_OPT_READY" ]; then
		gp_run_bounded "$GP_READY_TIMEOUT" "$GP_STAGE/ready.out" "$GP_OPT_READY" && return 0
		if [ "$GP_BOUNDED_HUNG" = 1 ]; then
			GP_READY_ERR="the readiness command '$GP_OPT_READY' hung and was stopped"
		else
			GP_READY_ERR="'$GP_OPT_READY' failed: $(tail -n 2 "$GP_STAGE/ready.out" | tr '\n' ' ')"
		fi
		return 1
	fi
	gp_sock=${GP_OPT_ADDRESS:-$GP_ROOT$P_SOCKET}
	if [ ! -S "$gp_sock" ]; then
		GP_READY_ERR="no socket at $gp_sock"
		return 1
	fi
	if [ -z "$GP_OPT_CTR" ] && command -v crictl >/dev/null 2>&1; then
		crictl --runtime-endpoint "unix://$gp_sock" --timeout 2s info \
			</dev/null >"$GP_STAGE/ready.out" 2>&1 && return 0
		GP_READY_ERR="crictl info: $(tail -n 2 "$GP_STAGE/ready.out" | tr '\n' ' ')"
		return 1
	fi
	gp_ctr=$GP_OPT_CTR
	if [ -z "$gp_ctr" ]; then
		gp_ctr=$(dirname "$GP_CONTAINERD")/ctr
		[ -x "$gp_ctr" ] || gp_ctr=$(command -v ctr 2>/dev/null)
	fi
	if [ -z "$gp_ctr" ]; then
		GP_READY_ERR="neither crictl nor ctr found: pass --ready-cmd"
		return 1
	fi
	# The daemon serving is not enough: the CRI plugin must have loaded (it does not when
	# the default runtime is missing, and the kubelet then sees a dead runtime).
	gp_cri=$("$gp_ctr" --address "$gp_sock" --connect-timeout 2s plugins ls \
		</dev/null 2>"$GP_STAGE/ready.out" |
		awk '$1 == "io.containerd.grpc.v1" && $2 == "cri" { print $NF }')
	[ "$gp_cri" = ok ] && return 0
	GP_READY_ERR="cri plugin status '${gp_cri:-absent}' $(tail -n 1 "$GP_STAGE/ready.out")"
	return 1
}

gp_wait_ready() {
	gp_now_ms
	gp_wr_end=$((GP_MS + GP_READY_TIMEOUT * 1000))
	while :; do
		gp_ready_once && return 0
		gp_now_ms
		[ "$GP_MS" -ge "$gp_wr_end" ] && return 1
		gp_sleep
	done
}

# ---------------------------------------------------------------------------------------
# The lock: a symlink whose target names its owner ("pid:starttime"), created atomically.
# An owner that is gone (or whose pid was reused) is stale and its lock is broken.

gp_starttime() {
	gp_st_line=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	gp_st_rest=${gp_st_line##*) }
	# shellcheck disable=SC2086
	set -- $gp_st_rest
	shift 19
	printf '%s\n' "$1"
}

gp_owner_alive() {
	gp_oa_pid=${1%%:*}
	gp_oa_start=${1#*:}
	[ -d "/proc/$gp_oa_pid" ] || return 1
	[ "$(gp_starttime "$gp_oa_pid")" = "$gp_oa_start" ]
}

gp_lock() {
	if ! mkdir -p "$GP_STATE" || ! chmod 700 "$GP_STATE"; then
		gp_say "cannot create $GP_STATE (read-only or failing disk?); nothing was changed"
		gp_json_result false "cannot create $GP_STATE; nothing was changed" ""
		exit 1
	fi
	GP_ME="$$:$(gp_starttime $$)"
	gp_now_ms
	gp_lk_end=$((GP_MS + GP_LOCK_TIMEOUT * 1000))
	gp_lk_said=0
	while :; do
		if ln -s "$GP_ME" "$GP_LOCK" 2>/dev/null; then
			GP_LOCKED=1
			return 0
		fi
		if ! gp_lk_owner=$(readlink "$GP_LOCK" 2>/dev/null); then
			if [ -e "$GP_LOCK" ]; then
				gp_fail 2 "refused: $GP_LOCK exists but is not a gpuplane lock (gpuplane's lock is a symbolic link naming its owner); if no gpuplane agent runs on this node, remove it; nothing changed"
			fi
			# Gone between the two calls (its owner finished): try again, a bounded number
			# of times: a lock that cannot be made at all is a full or read-only disk.
			gp_lk_miss=$((${gp_lk_miss:-0} + 1))
			if [ "$gp_lk_miss" -gt 50 ]; then
				gp_fail 1 "cannot create the lock $GP_LOCK (full or read-only disk?); nothing was changed"
			fi
			continue
		fi
		if ! gp_owner_alive "$gp_lk_owner"; then
			# Break it under a second lock, re-checking the owner: two waiters must not
			# both break, the second removing the first one's fresh lock.
			if ln -s "$GP_ME" "$GP_LOCK.break" 2>/dev/null; then
				if [ "$(readlink "$GP_LOCK" 2>/dev/null)" = "$gp_lk_owner" ]; then
					rm -f "$GP_LOCK"
					gp_say "removed the stale lock of pid ${gp_lk_owner%%:*} (no longer running)"
				fi
				rm -f "$GP_LOCK.break"
			else
				gp_lk_breaker=$(readlink "$GP_LOCK.break" 2>/dev/null) &&
					! gp_owner_alive "$gp_lk_breaker" && rm -f "$GP_LOCK.break"
			fi
			continue
		fi
		if [ "$gp_lk_said" = 0 ]; then
			gp_say "waiting for another gpuplane agent run (pid ${gp_lk_owner%%:*}) to finish"
			gp_lk_said=1
		fi
		gp_now_ms
		if [ "$GP_MS" -ge "$gp_lk_end" ]; then
			gp_say "another gpuplane agent run (pid ${gp_lk_owner%%:*}) still holds $GP_LOCK after ${GP_LOCK_TIMEOUT}s; nothing changed"
			exit 2
		fi
		gp_sleep
	done
}

gp_unlock() {
	if [ "${GP_LOCKED:-0}" = 1 ] && [ "$(readlink "$GP_LOCK" 2>/dev/null)" = "$GP_ME" ]; then
		rm -f "$GP_LOCK"
	fi
	GP_LOCKED=0
}

