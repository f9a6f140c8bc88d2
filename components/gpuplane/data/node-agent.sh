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

# ---------------------------------------------------------------------------------------
# Arguments and payload

gp_begin() {
	GP_MODE=${1:-help}
	[ $# -gt 0 ] && shift
	GP_ROOT=
	GP_OPT_CONTAINERD=
	GP_OPT_CTR=
	GP_OPT_ADDRESS=
	GP_OPT_RESTART=
	GP_OPT_READY=
	GP_READY_TIMEOUT=120
	GP_RESTART_TIMEOUT=180
	GP_LOCK_TIMEOUT=600
	GP_OPT_PLAN_ID=
	GP_OPT_DOCKERD=
	GP_OPT_DOCKER_RESTART=
	GP_OPT_DOCKER_READY=
	while [ $# -gt 0 ]; do
		gp_opt=$1
		case $gp_opt in
		--*=*)
			gp_val=${gp_opt#*=}
			gp_opt=${gp_opt%%=*}
			shift
			;;
		--*)
			if [ $# -lt 2 ]; then
				gp_say "option $gp_opt needs a value"
				exit 2
			fi
			gp_val=$2
			shift 2
			;;
		*)
			gp_say "unexpected argument '$gp_opt'"
			gp_usage >&2
			exit 2
			;;
		esac
		case $gp_opt in
		--root) GP_ROOT=$gp_val ;;
		--containerd) GP_OPT_CONTAINERD=$gp_val ;;
		--ctr) GP_OPT_CTR=$gp_val ;;
		--address) GP_OPT_ADDRESS=$gp_val ;;
		--restart-cmd) GP_OPT_RESTART=$gp_val ;;
		--ready-cmd) GP_OPT_READY=$gp_val ;;
		--ready-timeout) GP_READY_TIMEOUT=$gp_val ;;
		--restart-timeout) GP_RESTART_TIMEOUT=$gp_val ;;
		--lock-timeout) GP_LOCK_TIMEOUT=$gp_val ;;
		--plan-id) GP_OPT_PLAN_ID=$gp_val ;;
		--dockerd) GP_OPT_DOCKERD=$gp_val ;;
		--docker-restart-cmd) GP_OPT_DOCKER_RESTART=$gp_val ;;
		--docker-ready-cmd) GP_OPT_DOCKER_READY=$gp_val ;;
		*)
			gp_say "unknown option $gp_opt"
			gp_usage >&2
			exit 2
			;;
		esac
	done
	for gp_n in "$GP_READY_TIMEOUT" "$GP_LOCK_TIMEOUT" "$GP_RESTART_TIMEOUT"; do
		case $gp_n in
		'' | *[!0-9]*)
			gp_say "timeouts are whole seconds, got '$gp_n'"
			exit 2
			;;
		esac
	done
	case $GP_ROOT in
	'' | /) GP_ROOT= ;;
	/*) GP_ROOT=${GP_ROOT%/} ;;
	*)
		gp_say "--root must be an absolute path, got '$GP_ROOT'"
		exit 2
		;;
	esac
	if [ -n "$GP_ROOT" ] && [ ! -d "$GP_ROOT" ]; then
		gp_say "--root $GP_ROOT is not a directory"
		exit 2
	fi
	GP_STATE=$GP_ROOT/var/lib/gpuplane
	GP_TXN=$GP_STATE/backup/txn
	GP_ORIG=$GP_STATE/backup/originals
	GP_MANIFEST=$GP_STATE/manifest
	GP_BASES=$GP_STATE/bases
	GP_BASEDIR=$GP_STATE/backup/bases
	GP_STATEFILE=$GP_STATE/state
	GP_LOCK=$GP_STATE/lock
	GP_UNITS=$GP_STATE/units
	GP_UNITS_ERR=
	GP_LOCKED=0
	GP_TXN_OPEN=0
	GP_NODE_TOUCHED=0
	GP_RESTARTED=0
	GP_ROLLBACK_OK=1
	GP_ROLLBACK_NOTE=
	GP_ROLLBACK_ERR=
	GP_HAVE_PLAN=0
	GP_NFILES=0
	P_DISTRO='' P_CONFIG='' P_SOCKET='' P_CONTAINERD='' P_RESTART='' P_EDITS='' P_RUNTIMES=''
	P_DEFAULT='' P_NVIDIA='' P_TEMPLATE='' P_ID='' P_VERSION='' P_UNITS='' P_RENDERED=''
	P_DOCKER_CONFIG='' P_DOCKER_RESTART='' P_DOCKER_RUNTIME='' P_MASK=''
	GP_DOCKER_RESTARTED=0
	GP_DOCKER_FILE='' GP_DOCKER_RESTART='' GP_DOCKER_WANT='' GP_DOCKER_ERR='' GP_DOCKER_CHECK=''
	gp_now_ms
	GP_T0=$GP_MS
	GP_T_RESTART=
	GP_T_READY=
	trap gp_on_exit EXIT
	trap 'gp_on_signal INT' INT
	trap 'gp_on_signal TERM' TERM
	trap 'gp_on_signal HUP' HUP
	GP_STAGE=$(mktemp -d "${TMPDIR:-/tmp}/gpuplane-agent.XXXXXX") || {
		gp_say "cannot create a temporary directory in ${TMPDIR:-/tmp}; nothing was changed"
		exit 1
	}
	: >"$GP_STAGE/files"
	: >"$GP_STAGE/bases.plan"
	: >"$GP_STAGE/units.done"
}

# gp_plan KEY VALUE: one setting of the plan (written by components/gpuplane/agent/script.py).
gp_plan() {
	case $2 in
	*"$GP_NL"* | *"$GP_TAB"*)
		gp_say "payload: value of '$1' contains a tab or newline"
		exit 2
		;;
	esac
	case $1 in
	id) P_ID=$2 ;;
	distro) P_DISTRO=$2 ;;
	containerd_version) P_VERSION=$2 ;;
	config) P_CONFIG=$2 ;;
	template) P_TEMPLATE=$2 ;;
	rendered) P_RENDERED=$2 ;;
	socket) P_SOCKET=$2 ;;
	containerd) P_CONTAINERD=$P_CONTAINERD$2$GP_NL ;;
	restart) P_RESTART=$2 ;;
	unit) P_UNITS=$P_UNITS$2$GP_NL ;;
	edit) P_EDITS=$P_EDITS$2$GP_NL ;;
	runtime) P_RUNTIMES=$P_RUNTIMES$2$GP_NL ;;
	default) P_DEFAULT=$2 ;;
	nvidia) P_NVIDIA=$2 ;;
	base) gp_plan_base "$2" ;;
	docker_config) P_DOCKER_CONFIG=$2 ;;
	docker_restart) P_DOCKER_RESTART=$2 ;;
	docker_runtime) P_DOCKER_RUNTIME=$2 ;;
	mask_unit) gp_plan_unit "$2" ;;
	*)
		gp_say "payload: unknown plan key '$1' (agent and payload from different versions?)"
		exit 2
		;;
	esac
	GP_HAVE_PLAN=1
}

# gp_plan_unit NAME: a host systemd unit the plan masks (85-units.sh).
gp_plan_unit() {
	case $1 in
	'' | -* | *[!A-Za-z0-9_.@-]*)
		gp_say "payload: '$1' is not a systemd unit name"
		exit 2
		;;
	esac
	P_MASK=$P_MASK$1$GP_NL
}

# gp_plan_base 'SHA256|absent PATH': the original of PATH the plan was made from.
gp_plan_base() {
	gp_pb_sha=${1%% *}
	gp_pb_path=${1#* }
	case $gp_pb_sha in
	absent) ;;
	*[!0-9a-f]* | '') gp_pb_sha=bad ;;
	*) [ ${#gp_pb_sha} -eq 64 ] || gp_pb_sha=bad ;;
	esac
	if [ "$gp_pb_sha" = bad ]; then
		gp_say "payload: base '$1' is not 'SHA256 PATH' or 'absent PATH'"
		exit 2
	fi
	gp_check_path "$gp_pb_path" || exit 2
	printf '%s\t%s\n' "$gp_pb_path" "$gp_pb_sha" >>"$GP_STAGE/bases.plan"
}

# gp_file PATH SHA256 FINAL_NEWLINE <<'DELIMITER': one planned file, verbatim.
gp_file() {
	gp_check_path "$1" || exit 2
	GP_NFILES=$((GP_NFILES + 1))
	gp_f=$GP_STAGE/f$GP_NFILES
	if [ "$3" = 1 ]; then
		cat >"$gp_f"
	else
		awk 'NR > 1 { printf "\n" } { printf "%s", $0 }' >"$gp_f"
	fi
	printf '%s\t%s\t%s\n' "$1" "$2" "$gp_f" >>"$GP_STAGE/files"
}

gp_check_path() {
	case $1 in
	/*) ;;
	*)
		gp_say "payload: '$1' is not an absolute path"
		return 1
		;;
	esac
	case $1 in
	*"$GP_NL"* | *"$GP_TAB"* | */../* | */.. | */./* | */. | *//* | */)
		gp_say "payload: refusing the path '$1' (.., //, tab, newline or trailing /)"
		return 1
		;;
	esac
	return 0
}

gp_end() {
	case $GP_MODE in
	apply) gp_apply ;;
	status) gp_status ;;
	restore) gp_restore ;;
	help | -h | --help) gp_usage ;;
	*)
		gp_say "unknown mode '$GP_MODE'"
		gp_usage >&2
		exit 2
		;;
	esac
}

# ---------------------------------------------------------------------------------------
# Small helpers

# GP_MS: milliseconds of uptime (10 ms resolution, no fork).
gp_now_ms() {
	read -r gp_up _ </proc/uptime
	gp_s=${gp_up%.*}
	gp_c=${gp_up#*.}
	gp_c=${gp_c#0}
	GP_MS=$((gp_s * 1000 + gp_c * 10))
}

gp_sleep() { sleep 0.1 2>/dev/null || sleep 1; }

# gp_sha FILE: sha256 of FILE, "-" when it does not exist.
gp_sha() {
	if [ -f "$1" ] || [ -L "$1" ]; then
		gp_sha_out=$(sha256sum <"$1") || return 1
		printf '%s\n' "${gp_sha_out%% *}"
	else
		printf '%s\n' -
	fi
}

# gp_js STRING: STRING as a JSON string.
gp_js() {
	case $1 in
	*[\"\\]*) printf '%s' "$1" | awk "$GP_AWK_JSTR"' { printf "%s", jstr($0) }' ;;
	*) printf '"%s"' "$1" ;;
	esac
}

GP_AWK_JSTR='
function jstr(s,   i, c, o) {
	o = ""
	for (i = 1; i <= length(s); i++) {
		c = substr(s, i, 1)
		if (c == "\\" || c == "\"") o = o "\\" c
		else if (c == "\t") o = o "\\t"
		else if (c == "\n") o = o "\\n"
		else if (c == "\r") o = o "\\r"
		else o = o c
	}
	return "\"" o "\""
}
'

# The effective CRI runtimes from a `containerd config dump` (1.x: version 2 dump,
# "io.containerd.grpc.v1.cri"; 2.x: version 3, "io.containerd.cri.v1.runtime").
# Prints: "default<TAB>name", "cdi<TAB>bool" and one
# "runtime<TAB>name<TAB>runtime_type<TAB>BinaryName<TAB>SystemdCgroup" per runtime.
# shellcheck disable=SC2016 # an awk program: its $ fields are awk's, not the shell's
GP_AWK_FACTS='
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function unq(s,   q, o, i, c) {
	s = trim(s)
	q = substr(s, 1, 1)
	if (length(s) >= 2 && q == "\047" && substr(s, length(s), 1) == q)
		return substr(s, 2, length(s) - 2)
	if (length(s) >= 2 && q == "\"" && substr(s, length(s), 1) == q) {
		s = substr(s, 2, length(s) - 2)
		o = ""
		for (i = 1; i <= length(s); i++) {
			c = substr(s, i, 1)
			if (c == "\\" && i < length(s)) {
				i++
				c = substr(s, i, 1)
				if (c == "n") c = "\n"
				else if (c == "t") c = "\t"
			}
			o = o c
		}
		return o
	}
	return s
}
function splitkey(s, parts,   n, i, c, cur, q) {
	n = 0; cur = ""; q = ""
	for (i = 1; i <= length(s); i++) {
		c = substr(s, i, 1)
		if (q != "") {
			cur = cur c
			if (c == q) q = ""
			else if (c == "\\" && q == "\"") { i++; cur = cur substr(s, i, 1) }
			continue
		}
		if (c == "\"" || c == "\047") { q = c; cur = cur c; continue }
		if (c == ".") { parts[++n] = unq(cur); cur = ""; continue }
		cur = cur c
	}
	parts[++n] = unq(cur)
	return n
}
function runtime(name) {
	if (!(name in seen)) { seen[name] = 1; names[++nrt] = name }
}
/^[ \t]*\[\[/ { sect = ""; next }
/^[ \t]*\[/ {
	h = trim($0)
	h = substr(h, 2, length(h) - 2)
	n = splitkey(h, p)
	sect = ""
	if (n >= 2 && p[1] == "plugins" && \
	    (p[2] == "io.containerd.grpc.v1.cri" || p[2] == "io.containerd.cri.v1.runtime")) {
		if (n == 2) sect = "cri"
		else if (n == 3 && p[3] == "containerd") sect = "ctd"
		else if (n >= 5 && p[3] == "containerd" && p[4] == "runtimes") {
			name = p[5]
			runtime(name)
			if (n == 5) sect = "rt"
			else if (n == 6 && p[6] == "options") sect = "opt"
		}
	}
	next
}
/=/ {
	if (sect == "") next
	k = $0; sub(/=.*/, "", k); k = unq(k)
	v = $0; sub(/^[^=]*=/, "", v); v = trim(v)
	if (sect == "cri" && k == "enable_cdi") cdi = v
	else if (sect == "ctd" && k == "default_runtime_name") def = unq(v)
	else if (sect == "rt" && k == "runtime_type") rtype[name] = unq(v)
	else if (sect == "opt" && k == "BinaryName") rbin[name] = unq(v)
	else if (sect == "opt" && k == "SystemdCgroup") rsys[name] = v
}
END {
	printf "default\t%s\n", def
	if (cdi != "") printf "cdi\t%s\n", cdi
	for (i = 1; i <= nrt; i++) {
		n = names[i]
		printf "runtime\t%s\t%s\t%s\t%s\n", n, rtype[n], rbin[n], rsys[n]
	}
}
'

# ---------------------------------------------------------------------------------------
# containerd: config dump, facts, checks

# gp_dump CONFIG(node path) NAME: dump into $GP_STAGE/NAME.{toml,err,facts,sha}.
# Runs from the root as systemd does (1.6 resolves relative glob imports against it).
# A node without CONFIG runs on containerd's built-in defaults: those are dumped from an
# empty file (1.x's `config dump` refuses a missing one; on every line an empty file
# dumps the defaults, tests/real/test_no_top_level_file_dump.py).
gp_dump() {
	if [ -e "$GP_ROOT$1" ] || [ -L "$GP_ROOT$1" ]; then
		gp_dump_host "$GP_ROOT$1" "$2"
	else
		gp_dump_host /dev/null "$2"
	fi
}

# gp_dump_host FILE NAME: gp_dump of a file given by its path on this machine.
gp_dump_host() {
	gp_d_out=$GP_STAGE/$2
	if ! (cd "${GP_ROOT:-/}" && exec "$GP_CONTAINERD" --config "$1" config dump) \
		>"$gp_d_out.toml" 2>"$gp_d_out.err" </dev/null; then
		GP_DUMP_ERR=$(grep -v '^time=' "$gp_d_out.err" | tail -n 3 | tr '\n' ' ')
		[ -n "$GP_DUMP_ERR" ] || GP_DUMP_ERR=$(tail -n 3 "$gp_d_out.err" | tr '\n' ' ')
		return 1
	fi
	awk "$GP_AWK_FACTS" "$gp_d_out.toml" >"$gp_d_out.facts"
	# `imports` lists file names (1.x) or globs (2.x), not settings: leave it out.
	gp_d_sha=$(sed '/^imports[ 	]*=/d' "$gp_d_out.toml" | sha256sum)
	printf '%s\n' "${gp_d_sha%% *}" >"$gp_d_out.sha"
	return 0
}

gp_default_of() { awk -F '\t' '$1 == "default" { print $2 }' "$GP_STAGE/$1.facts"; }
gp_runtimes_of() { awk -F '\t' '$1 == "runtime" { printf "%s ", $2 }' "$GP_STAGE/$1.facts"; }
gp_has_runtime() {
	awk -F '\t' -v n="$2" '$1 == "runtime" && $2 == n { f = 1 } END { exit !f }' \
		"$GP_STAGE/$1.facts"
}

# gp_check NAME WANT_DEFAULT: does the dump NAME keep what the plan promises?
gp_check() {
	gp_ck_def=$(gp_default_of "$1")
	gp_ck_all=$(gp_runtimes_of "$1")
	gp_ck_names="runc$GP_NL$P_RUNTIMES"
	gp_ck_ifs=$IFS
	IFS=$GP_NL
	for gp_ck_rt in $gp_ck_names; do
		[ -n "$gp_ck_rt" ] || continue
		if ! gp_has_runtime "$1" "$gp_ck_rt"; then
			IFS=$gp_ck_ifs
			GP_CHECK_ERR="the merged config has no runtime '$gp_ck_rt' (runtimes: ${gp_ck_all:-none}); on containerd 1.x a later file replaces the whole CRI table (FM02)"
			return 1
		fi
	done
	IFS=$gp_ck_ifs
	if [ -z "$gp_ck_def" ] || ! gp_has_runtime "$1" "$gp_ck_def"; then
		gp_ck_set=$(gp_setters "$gp_ck_def")
		GP_CHECK_ERR="the default runtime '$gp_ck_def' is not among the runtimes (${gp_ck_all:-none})${gp_ck_set:+, default set in $gp_ck_set}: the CRI plugin would not load (FM09)"
		return 1
	fi
	if [ -n "$2" ] && [ "$gp_ck_def" != "$2" ]; then
		GP_CHECK_ERR="the default runtime is '$gp_ck_def', the plan expects '$2'"
		return 1
	fi
	return 0
}

# gp_setters NAME: the files next to the config that set default_runtime_name = NAME.
gp_setters() {
	grep -l -s -e "default_runtime_name *= *[\"']${1}[\"']" "$GP_ROOT$P_CONFIG" \
		"$GP_ROOT$(dirname "$P_CONFIG")"/*/*.toml 2>/dev/null | sed "s|^$GP_ROOT||" |
		tr '\n' ' ' | sed 's/ $//'
}

# The config the distribution will generate from the template, when it can be previewed
# (a template without Go template actions or ${VARIABLES} is the config itself).
# Sets GP_PREVIEW to a node path, or empty when only a restart can tell: also where the
# distribution renders the config containerd reads from gpuplane's drop-in itself, at its
# restart (k0s: the plan says `rendered`).
gp_preview_path() {
	GP_PREVIEW=
	[ -z "$P_RENDERED" ] || return 0
	if [ -z "$P_TEMPLATE" ]; then
		GP_PREVIEW=$P_CONFIG
		return 0
	fi
	[ -f "$GP_ROOT$P_TEMPLATE" ] || return 0
	grep -q -e '{{' -e '[$]{' "$GP_ROOT$P_TEMPLATE" && return 0
	gp_pv=$(dirname "$P_CONFIG")/.$(basename "$P_CONFIG").gpuplane-preview
	cp "$GP_ROOT$P_TEMPLATE" "$GP_ROOT$gp_pv" || return 1
	GP_PREVIEW=$gp_pv
	GP_PREVIEW_TMP=$GP_ROOT$gp_pv
	return 0
}

gp_preview_done() {
	[ -n "${GP_PREVIEW_TMP:-}" ] && rm -f "$GP_PREVIEW_TMP"
	GP_PREVIEW_TMP=
}

# ---------------------------------------------------------------------------------------
# The top-level config's data. The NVIDIA toolkit rewrites the file it is given as
# CONTAINERD_CONFIG (the top-level config, or a template distro's template) on every run:
# comments and key order go, the TOML data stays (../shared/reference/toolkit.md). Bytes
# then differ from what gpuplane wrote although nothing changed; the node has no TOML
# parser, so its own containerd compares: both files, side by side in the same directory
# (same imports, same relative paths), must `config dump` to the same settings (the
# `imports` line, which names the file itself, left out).

gp_top_path() { printf '%s\n' "${P_TEMPLATE:-$P_CONFIG}"; }

# gp_data_equal NODEPATH REF: does NODEPATH hold the same TOML data as the file REF? Each
# is dumped alone (its `imports` set aside: what they import would mask the file's own
# settings, e.g. a 1.x drop-in replacing the whole CRI table) and the `imports` values
# are compared as written (spaces and quote style aside).
gp_data_equal() {
	[ "$1" = "$(gp_top_path)" ] || return 1
	[ -f "$GP_ROOT$1" ] && [ -f "$2" ] && [ -n "${GP_CONTAINERD:-}" ] || return 1
	gp_toml_split "$GP_ROOT$1" "$GP_STAGE/de_node" && gp_toml_split "$2" "$GP_STAGE/de_ref" &&
		[ "$(cat "$GP_STAGE/de_node.imports")" = "$(cat "$GP_STAGE/de_ref.imports")" ] &&
		gp_dump_host "$GP_STAGE/de_node.toml" de_node_dump &&
		gp_dump_host "$GP_STAGE/de_ref.toml" de_ref_dump &&
		[ "$(cat "$GP_STAGE/de_node_dump.sha")" = "$(cat "$GP_STAGE/de_ref_dump.sha")" ]
}

# gp_toml_split FILE OUT: OUT.toml is FILE without its top-level `imports` (one line or a
# multi-line array), OUT.imports that value with blanks and quote style normalised.
gp_toml_split() {
	awk -v imp="$2.imports" '
		BEGIN { top = 1; printf "" > imp }
		!arr && /^[ \t]*\[/ { top = 0 }
		top && !arr && /^[ \t]*imports[ \t]*=/ { arr = 1 }
		arr {
			v = $0; sub(/^[ \t]*imports[ \t]*=/, "", v); gsub(/[ \t]/, "", v); gsub(/\047/, "\"", v)
			printf "%s", v > imp
			if ($0 ~ /\]/) arr = 0
			next
		}
		{ print }' "$1" >"$2.toml"
}

# gp_wrote_copy NODEPATH: where the bytes gpuplane last wrote to the top-level config are
# kept (only that file: the one the toolkit rewrites).
gp_wrote_copy() { printf '%s\n' "$GP_STATE/wrote"; }

gp_containerd_version() {
	"$GP_CONTAINERD" --version </dev/null 2>/dev/null | awk '{
		for (i = 1; i <= NF; i++) if ($i ~ /^v?[0-9]+\.[0-9]+/) {
			v = $i; sub(/^v/, "", v); split(v, p, "."); print p[1] "." p[2]; exit
		}
	}'
}

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

# ---------------------------------------------------------------------------------------
# Files: byte-exact backups and atomic replacement. Every write goes through a temp file
# and a rename, and a failed write removes its temp file: a full or read-only disk leaves
# nothing behind.

# gp_save NODEPATH DIR: keep the file's bytes, mode and owner under DIR, or record that it
# did not exist.
gp_save() {
	gp_sv_dst=$2$1
	mkdir -p "$(dirname "$gp_sv_dst")" || return 1
	rm -f "$gp_sv_dst" "$gp_sv_dst.gpuplane-absent"
	if [ -e "$GP_ROOT$1" ]; then
		cp -p "$GP_ROOT$1" "$gp_sv_dst" && return 0
		rm -f "$gp_sv_dst"
		return 1
	fi
	: >"$gp_sv_dst.gpuplane-absent"
}

# gp_saved_sha NODEPATH DIR: sha of a saved copy ("-" when it recorded absence).
gp_saved_sha() {
	if [ -e "$2$1.gpuplane-absent" ]; then printf '%s\n' -; else gp_sha "$2$1"; fi
}

# gp_put SRC NODEPATH [keep]: replace the file with SRC's bytes through a temp file in the
# same directory and a rename. "keep" takes mode, owner and times from SRC (a backup);
# otherwise an existing file keeps its own and a new one gets 0644.
gp_put() {
	gp_pt_dst=$GP_ROOT$2
	gp_pt_tmp=$(dirname "$gp_pt_dst")/.$(basename "$gp_pt_dst").gpuplane-tmp
	rm -f "$gp_pt_tmp"
	if [ "${3:-}" = keep ]; then
		cp -p "$1" "$gp_pt_tmp"
	elif [ -e "$gp_pt_dst" ]; then
		cp -p "$gp_pt_dst" "$gp_pt_tmp" && cat "$1" >"$gp_pt_tmp"
	else
		cat "$1" >"$gp_pt_tmp" && chmod 644 "$gp_pt_tmp"
	fi && mv -f "$gp_pt_tmp" "$gp_pt_dst" && return 0
	rm -f "$gp_pt_tmp" 2>/dev/null
	return 1
}

# gp_put_saved NODEPATH DIR: bring back what gp_save kept; a file that already holds it is
# left alone (so that undoing a run that never reached a file needs no disk space), and a
# parent directory a restore removed is made again.
gp_put_saved() {
	if [ -e "$2$1.gpuplane-absent" ]; then
		[ -e "$GP_ROOT$1" ] || [ -L "$GP_ROOT$1" ] || return 0
		rm -f "$GP_ROOT$1"
		return
	fi
	[ -f "$GP_ROOT$1" ] && [ ! -L "$GP_ROOT$1" ] &&
		[ "$(gp_sha "$2$1")" = "$(gp_sha "$GP_ROOT$1")" ] && return 0
	[ -d "$(dirname "$GP_ROOT$1")" ] || mkdir -p "$(dirname "$GP_ROOT$1")" || return 1
	gp_put "$2$1" "$1" keep
}

# gp_mkparents NODEPATH LIST: create missing parent directories, recording each in LIST
# before it is made (a journal entry must precede the change it undoes).
gp_mkparents() {
	gp_mp_dir=$(dirname "$1")
	gp_mp_new=
	while [ ! -d "$GP_ROOT$gp_mp_dir" ]; do
		gp_mp_new=$gp_mp_dir$GP_NL$gp_mp_new
		gp_mp_dir=$(dirname "$gp_mp_dir")
	done
	gp_mp_ifs=$IFS
	IFS=$GP_NL
	for gp_mp_d in $gp_mp_new; do
		IFS=$gp_mp_ifs
		{ cat "$2" 2>/dev/null && printf '%s\n' "$gp_mp_d"; } | gp_write_atomic "$2" || return 1
		mkdir "$GP_ROOT$gp_mp_d" && chmod 755 "$GP_ROOT$gp_mp_d" || return 1
	done
	IFS=$gp_mp_ifs
	return 0
}

# gp_rmdirs LIST: remove the recorded directories if empty, deepest first.
gp_rmdirs() {
	[ -f "$1" ] || return 0
	sort -r "$1" | while IFS= read -r gp_rd; do
		[ -n "$gp_rd" ] && rmdir "$GP_ROOT$gp_rd" 2>/dev/null
	done
	return 0
}

# gp_write_atomic FILE: replace FILE with stdin (temp file, fsync, rename); nothing is
# left behind when it fails.
gp_write_atomic() {
	if cat >"$1.tmp.$$" && gp_fsync "$1.tmp.$$" && mv -f "$1.tmp.$$" "$1"; then
		return 0
	fi
	rm -f "$1.tmp.$$" 2>/dev/null
	return 1
}

# gp_fsync FILE...: flush the files (coreutils >= 8.24 `sync FILE`; busybox, older: all).
gp_fsync() { sync "$@" 2>/dev/null || sync; }

gp_sync() { sync; }

# gp_step NAME: a step boundary. Test-only failpoint: with GPUPLANE_AGENT_FAILPOINT=NAME
# the agent dies here by SIGKILL, as a power cut or the OOM killer would stop it;
# GPUPLANE_AGENT_STEPS=FILE lists the boundaries a run passes (the crash matrix).
gp_step() {
	[ -n "${GPUPLANE_AGENT_STEPS:-}" ] && printf '%s %s\n' "$GP_MODE" "$1" >>"$GPUPLANE_AGENT_STEPS"
	if [ "${GPUPLANE_AGENT_FAILPOINT:-}" = "$GP_MODE:$1" ]; then
		kill -9 $$
		sleep 5
	fi
	:
}

# ---------------------------------------------------------------------------------------
# The transaction journal (write-ahead). backup/txn holds, before anything changes, every
# node file the run may touch as it was, a snapshot of gpuplane's own state (state,
# manifest, bases, wrote) and the phase reached; dirs lists the directories the run made.
# It is built in txn.new, flushed, and renamed into place: its presence means "a run may
# have left the node half-changed", and undoing it puts node and state back as they were.

GP_STATE_FILES='state manifest bases wrote'

# gp_txn_begin MODE LIST: LIST holds node paths, one per line.
gp_txn_begin() {
	rm -rf "$GP_TXN.new" "$GP_TXN.done"
	if gp_txn_build "$@" && mv "$GP_TXN.new" "$GP_TXN" && gp_fsync "$GP_STATE/backup"; then
		GP_TXN_OPEN=1
		return 0
	fi
	rm -rf "$GP_TXN.new" 2>/dev/null
	return 1
}

gp_txn_build() {
	mkdir -p "$GP_TXN.new/files" "$GP_TXN.new/state" || return 1
	while IFS= read -r gp_tb; do
		[ -n "$gp_tb" ] || continue
		gp_save "$gp_tb" "$GP_TXN.new/files" || return 1
		printf '%s\n' "$gp_tb" >>"$GP_TXN.new/list" || return 1
	done <"$2"
	: >>"$GP_TXN.new/list" || return 1
	# State files are only ever replaced by a rename: a hard link is a snapshot (and needs
	# no disk space); a copy where links are not possible.
	for gp_tb in $GP_STATE_FILES; do
		if [ -e "$GP_STATE/$gp_tb" ]; then
			ln "$GP_STATE/$gp_tb" "$GP_TXN.new/state/$gp_tb" 2>/dev/null ||
				cp -p "$GP_STATE/$gp_tb" "$GP_TXN.new/state/$gp_tb" || return 1
		else
			: >"$GP_TXN.new/state/$gp_tb.gpuplane-absent" || return 1
		fi
	done
	: >"$GP_TXN.new/dirs" || return 1
	# the restart command of this run: a recovery may have no plan and no state to take
	# it from (a first apply killed after its restart)
	printf '%s\n' "$GP_RESTART" >"$GP_TXN.new/restart" || return 1
	printf '%s\n' "${GP_DOCKER_RESTART:-}" >"$GP_TXN.new/docker-restart" || return 1
	printf '%s\n' "$1" >"$GP_TXN.new/mode" && echo write >"$GP_TXN.new/phase" || return 1
	sync
}

gp_txn_phase() { printf '%s\n' "$1" | gp_write_atomic "$GP_TXN/phase"; }

# gp_txn_commit: the run's changes stand. The rename makes it one step; then the originals
# and recorded bases no longer referenced are removed (never before: a journal undone
# after a commit started needs them).
gp_txn_commit() {
	rm -rf "$GP_TXN.done"
	if [ -d "$GP_TXN" ]; then
		mv "$GP_TXN" "$GP_TXN.done" || return 1
		gp_fsync "$GP_STATE/backup"
	fi
	GP_TXN_OPEN=0
	rm -rf "$GP_TXN.done"
	gp_gc
}

# gp_gc: remove originals the manifest no longer lists and recorded bases no longer in
# $GP_BASES (left by a commit, or by a run undone from its journal).
gp_gc() {
	gp_gc_dir "$GP_ORIG" "$GP_MANIFEST" file
	gp_gc_dir "$GP_BASEDIR" "$GP_BASES" base
}

gp_gc_dir() { # DIR LIST KIND: remove the files under DIR that LIST names no KIND line for
	[ -d "$1" ] && find "$1" -type f 2>/dev/null | while IFS= read -r gp_gc; do
		gp_gc_path=${gp_gc#"$1"}
		gp_gc_path=${gp_gc_path%.gpuplane-absent}
		[ -f "$2" ] && awk -F '\t' -v p="$gp_gc_path" -v k="$3" \
			'$1 == k && $2 == p { f = 1 } END { exit !f }' "$2" && continue
		rm -f "$gp_gc"
	done
	:
}

# gp_state_back: put gpuplane's state files back as the journal saw them (link + rename:
# no disk space needed, so this works on the full disk that made a run fail).
gp_state_back() {
	for gp_sb in $GP_STATE_FILES; do
		if [ -e "$GP_TXN/state/$gp_sb.gpuplane-absent" ]; then
			rm -rf "${GP_STATE:?}/${gp_sb:?}" || return 1
		elif [ -e "$GP_TXN/state/$gp_sb" ]; then
			[ -f "$GP_STATE/$gp_sb" ] &&
				[ "$(gp_sha "$GP_STATE/$gp_sb")" = "$(gp_sha "$GP_TXN/state/$gp_sb")" ] && continue
			rm -f "$GP_STATE/.$gp_sb.back"
			if ! { { ln "$GP_TXN/state/$gp_sb" "$GP_STATE/.$gp_sb.back" 2>/dev/null ||
				cp -p "$GP_TXN/state/$gp_sb" "$GP_STATE/.$gp_sb.back"; } &&
				mv -f "$GP_STATE/.$gp_sb.back" "$GP_STATE/$gp_sb"; }; then
				rm -f "$GP_STATE/.$gp_sb.back"
				return 1
			fi
		fi
	done
}

# Put every file of the journal back; restart again if containerd may have restarted.
gp_rollback() {
	GP_ROLLBACK_OK=1
	GP_ROLLBACK_ERR=
	GP_ROLLBACK_NOTE=
	gp_preview_done
	[ -d "$GP_TXN" ] || return 0
	gp_rb_phase=$(cat "$GP_TXN/phase" 2>/dev/null)
	while IFS= read -r gp_rb; do
		[ -n "$gp_rb" ] || continue
		# a write a kill stopped between its temp file and the rename
		rm -f "$(dirname "$GP_ROOT$gp_rb")/.$(basename "$gp_rb").gpuplane-tmp" 2>/dev/null
		gp_put_saved "$gp_rb" "$GP_TXN/files" && continue
		GP_ROLLBACK_OK=0
		gp_rb_was=$(gp_word "$(gp_saved_sha "$gp_rb" "$GP_TXN/files")")
		GP_ROLLBACK_ERR="${GP_ROLLBACK_ERR:+$GP_ROLLBACK_ERR; }could not put back $gp_rb (the node has $(gp_word "$(gp_sha "$GP_ROOT$gp_rb")"), before this run it was $gp_rb_was; that copy is kept at $GP_TXN/files$gp_rb)"
	done <"$GP_TXN/list"
	gp_rmdirs "$GP_TXN/dirs"
	[ -n "$P_CONFIG" ] &&
		rm -f "$GP_ROOT$(dirname "$P_CONFIG")/.$(basename "$P_CONFIG").gpuplane-preview" 2>/dev/null
	if ! gp_state_back; then
		GP_ROLLBACK_OK=0
		GP_ROLLBACK_ERR="${GP_ROLLBACK_ERR:+$GP_ROLLBACK_ERR; }could not put back gpuplane's own state in $GP_STATE (copies in $GP_TXN/state)"
	fi
	gp_sync
	if [ "$GP_RESTARTED" = 1 ] || [ "$gp_rb_phase" = restart ]; then
		[ -z "$GP_OPT_RESTART" ] && [ -s "$GP_TXN/restart" ] && GP_RESTART=$(cat "$GP_TXN/restart")
		gp_say "restarting containerd again on the restored files"
		if gp_restart; then
			GP_ROLLBACK_NOTE=", and containerd was restarted on them and serves"
		else
			GP_ROLLBACK_OK=0
			GP_ROLLBACK_ERR="${GP_ROLLBACK_ERR:+$GP_ROLLBACK_ERR; }the files are restored, but containerd did not come back on them: $GP_RESTART_ERR"
		fi
	fi
	if [ "$GP_DOCKER_RESTARTED" = 1 ] || [ -f "$GP_TXN/docker-restarting" ]; then
		# the journal's command: a recovery runs before this run's plan or state is read
		GP_DOCKER_RESTART=$GP_OPT_DOCKER_RESTART
		[ -z "$GP_DOCKER_RESTART" ] && [ -s "$GP_TXN/docker-restart" ] &&
			GP_DOCKER_RESTART=$(cat "$GP_TXN/docker-restart")
		gp_say "restarting Docker again on its restored daemon.json"
		GP_DOCKER_WANT=
		if gp_docker_restart; then
			GP_ROLLBACK_NOTE="$GP_ROLLBACK_NOTE, and Docker was restarted on its original daemon.json and serves"
		else
			GP_ROLLBACK_OK=0
			GP_ROLLBACK_ERR="${GP_ROLLBACK_ERR:+$GP_ROLLBACK_ERR; }the files are restored, but Docker did not come back on them: $GP_DOCKER_ERR"
		fi
	fi
	if [ "$GP_ROLLBACK_OK" = 1 ]; then
		gp_txn_commit
		# A first run that did not complete leaves nothing behind: the files are the
		# originals again, so there is nothing to restore later.
		[ -f "$GP_STATEFILE" ] || gp_clean_state
	fi
}

# A journal left by a run that was killed: undo what it did before anything else.
gp_recover() {
	rm -rf "$GP_TXN.new" "$GP_TXN.done"
	# temp files of writes a kill interrupted (gp_write_atomic, gp_state_back)
	for gp_rc_tmp in "$GP_STATE"/*.tmp.* "$GP_STATE"/.*.back; do
		[ -f "$gp_rc_tmp" ] && rm -f "$gp_rc_tmp"
	done
	if [ -d "$GP_TXN" ]; then
		gp_say "an earlier $(cat "$GP_TXN/mode" 2>/dev/null || echo apply) stopped half-way (phase $(cat "$GP_TXN/phase" 2>/dev/null)): restoring the files it had changed"
		GP_TXN_OPEN=1
		gp_rollback
		if [ "$GP_ROLLBACK_OK" != 1 ]; then
			gp_say "RESTORE INCOMPLETE: $GP_ROLLBACK_ERR; backups are in $GP_TXN"
			gp_json_result false "recovery of an interrupted run failed: $GP_ROLLBACK_ERR" false
			exit 3
		fi
		GP_RESTARTED=0
		gp_state_reset
		gp_load_state
	fi
	# No state but leftovers: a restore that stopped while forgetting its state (it
	# removes the state file first), or a first apply undone: nothing is managed.
	if [ ! -f "$GP_STATEFILE" ]; then
		gp_clean_state
	else
		gp_gc
	fi
}

# ---------------------------------------------------------------------------------------
# State: the plan last applied (key=value), and the manifest of managed files
# ("file<TAB>path<TAB>sha written" and "dir<TAB>path" for directories gpuplane created).

gp_load_state() {
	[ -f "$GP_STATEFILE" ] || return 1
	while IFS= read -r gp_ls; do
		gp_lk=${gp_ls%%=*}
		gp_lv=${gp_ls#*=}
		case $gp_lk in
		id) S_ID=$gp_lv ;;
		distro) S_DISTRO=$gp_lv ;;
		containerd_version) S_VERSION=$gp_lv ;;
		config) S_CONFIG=$gp_lv ;;
		template) S_TEMPLATE=$gp_lv ;;
		rendered) S_RENDERED=$gp_lv ;;
		socket) S_SOCKET=$gp_lv ;;
		containerd) S_CONTAINERD=$gp_lv ;;
		restart) S_RESTART=$gp_lv ;;
		default) S_DEFAULT=$gp_lv ;;
		nvidia) S_NVIDIA=$gp_lv ;;
		original_default) S_ORIGINAL_DEFAULT=$gp_lv ;;
		config_sha256) S_CONFIG_SHA=$gp_lv ;;
		docker_config) S_DOCKER_CONFIG=$gp_lv ;;
		docker_restart) S_DOCKER_RESTART=$gp_lv ;;
		esac
	done <"$GP_STATEFILE"
	return 0
}

gp_state_reset() {
	S_ID='' S_DISTRO='' S_VERSION='' S_CONFIG='' S_TEMPLATE='' S_RENDERED='' S_SOCKET='' S_CONTAINERD='' S_RESTART=''
	S_DEFAULT='' S_NVIDIA='' S_ORIGINAL_DEFAULT='' S_CONFIG_SHA='' S_DOCKER_CONFIG='' S_DOCKER_RESTART=''
}

# Use the state as the plan (restore and status run without a payload).
gp_plan_from_state() {
	P_ID=$S_ID P_DISTRO=$S_DISTRO P_VERSION=$S_VERSION P_CONFIG=$S_CONFIG
	P_TEMPLATE=$S_TEMPLATE P_RENDERED=$S_RENDERED P_SOCKET=$S_SOCKET P_CONTAINERD=$S_CONTAINERD
	P_RESTART=$S_RESTART P_DEFAULT=$S_DEFAULT P_NVIDIA=$S_NVIDIA
	P_DOCKER_CONFIG=$S_DOCKER_CONFIG P_DOCKER_RESTART=$S_DOCKER_RESTART
}

gp_state_text() { # CONFIG_SHA ORIGINAL_DEFAULT
	printf 'agent_version=%s\nid=%s\ndistro=%s\ncontainerd_version=%s\nconfig=%s\n' \
		"$GP_AGENT_VERSION" "$P_ID" "$P_DISTRO" "$P_VERSION" "$P_CONFIG"
	printf 'template=%s\nsocket=%s\ncontainerd=%s\nrestart=%s\ndefault=%s\nnvidia=%s\n' \
		"$P_TEMPLATE" "$P_SOCKET" "${P_CONTAINERD%%"$GP_NL"*}" "$P_RESTART" "$P_DEFAULT" "$P_NVIDIA"
	printf 'original_default=%s\nconfig_sha256=%s\n' "$2" "$1"
	[ -z "$P_RENDERED" ] || printf 'rendered=%s\n' "$P_RENDERED"
	[ -z "$P_DOCKER_CONFIG" ] || printf 'docker_config=%s\ndocker_restart=%s\n' \
		"$P_DOCKER_CONFIG" "$P_DOCKER_RESTART"
}

gp_manifest_sha() { # NODEPATH: the sha256 gpuplane wrote to it, as the manifest records
	[ -f "$GP_MANIFEST" ] && awk -F '\t' -v p="$1" '$1 == "file" && $2 == p { print $3; exit }' "$GP_MANIFEST"
}

gp_manifest_files() { [ -f "$GP_MANIFEST" ] && awk -F '\t' '$1 == "file" { print $2 }' "$GP_MANIFEST"; }

gp_install_self() {
	if command -v gp_self >/dev/null 2>&1; then
		gp_self >"$GP_STAGE/agent.sh" || return 1
	else
		return 0
	fi
	if [ "$(gp_sha "$GP_STAGE/agent.sh")" != "$(gp_sha "$GP_STATE/agent.sh")" ]; then
		gp_write_atomic "$GP_STATE/agent.sh" <"$GP_STAGE/agent.sh" && chmod 700 "$GP_STATE/agent.sh"
	fi
}

# ---------------------------------------------------------------------------------------
# Where the node's containerd really lives, and which one the kubelet uses

gp_detect() {
	case $P_DISTRO in
	k8s-snap)
		gp_lockfile=$GP_ROOT/var/snap/k8s/common/lock/.containerd-base-dir
		gp_real=/etc/containerd/config.toml
		gp_base=
		if [ -f "$gp_lockfile" ]; then
			gp_base=$(tr -d '\n\r' <"$gp_lockfile")
			gp_base=${gp_base%/}
			[ -n "$gp_base" ] && gp_real=$gp_base/k8s-containerd/etc/containerd/config.toml
		elif [ ! -f "$GP_ROOT$gp_real" ] &&
			[ -f "$GP_ROOT/var/snap/k8s/common/etc/containerd/config.toml" ]; then
			gp_real=/var/snap/k8s/common/etc/containerd/config.toml
		fi
		if [ "$gp_real" != "$P_CONFIG" ]; then
			if [ -n "$gp_base" ]; then
				gp_fix="set \`gpuplane:cluster.containerdBaseDir: $gp_base\`"
				gp_from="the snap's containerd base dir is $gp_base (from $gp_lockfile)"
			else
				gp_fix="leave \`gpuplane:cluster.containerdBaseDir\` unset"
				gp_from="the snap uses the default containerd base dir (no custom base dir in $gp_lockfile)"
			fi
			gp_fail 2 "refused: $gp_from, so its containerd reads $gp_real, but the plan is for $P_CONFIG (FM01/FM17); $gp_fix; nothing changed"
		fi
		;;
	esac
	if [ ! -f "$GP_ROOT$P_CONFIG" ] && [ -n "$P_TEMPLATE" ]; then
		gp_fail 2 "refused: $P_CONFIG does not exist: $P_DISTRO generates it when it starts, so it is not running or not installed here (check \`gpuplane:cluster.distro\`); nothing changed"
	fi
}

# Print "source<TAB>endpoint" for every kubelet container runtime endpoint found: running
# processes first; the usual flag and config files when no kubelet runs.
gp_kubelet_endpoints() {
	grep -l -e '--container-runtime-endpoint' "$GP_ROOT"/proc/[0-9]*/cmdline 2>/dev/null |
		while IFS= read -r gp_ke; do
			{ tr '\000' '\n' <"$gp_ke"; } 2>/dev/null | awk -v src="$gp_ke" '
				NR == 1 { n = split($0, a, "/"); exe = a[n]
					if (exe !~ /kubelet|kubelite|^k3s|^rke2/) exit }
				want { print src "\t" $0; want = 0; next }
				/^--container-runtime-endpoint=/ { v = $0; sub(/^[^=]*=/, "", v); print src "\t" v }
				$0 == "--container-runtime-endpoint" { want = 1 }'
		done >"$GP_STAGE/endpoints"
	if [ -s "$GP_STAGE/endpoints" ]; then
		cat "$GP_STAGE/endpoints"
		return 0
	fi
	if [ -f "$GP_ROOT/var/lib/kubelet/config.yaml" ]; then
		sed -n 's/^containerRuntimeEndpoint:[ 	]*["'\'']\{0,1\}\([^"'\'' 	]*\).*/\1/p' \
			"$GP_ROOT/var/lib/kubelet/config.yaml" | sed "s|^|/var/lib/kubelet/config.yaml$GP_TAB|"
	fi
	for gp_kf in /var/lib/kubelet/kubeadm-flags.env /etc/default/kubelet /etc/sysconfig/kubelet \
		/var/snap/k8s/common/args/kubelet /var/snap/microk8s/current/args/kubelet; do
		[ -f "$GP_ROOT$gp_kf" ] || continue
		# shellcheck disable=SC2016 # ${SNAP_COMMON} and ${SNAP_DATA} are text in MicroK8s' args file
		sed -n 's/.*--container-runtime-endpoint[= ]["'\'']\{0,1\}\([^"'\'' 	]*\).*/\1/p' \
			"$GP_ROOT$gp_kf" | sed -e 's|\${SNAP_COMMON}|/var/snap/microk8s/common|' \
			-e 's|\${SNAP_DATA}|/var/snap/microk8s/current|' -e "s|^|$gp_kf$GP_TAB|"
	done
}

gp_norm_socket() {
	gp_ns=${1#unix://}
	case $gp_ns in
	/var/run/*) gp_ns=/run/${gp_ns#/var/run/} ;;
	esac
	printf '%s\n' "$gp_ns"
}

# FM17: refuse to configure a containerd the kubelet does not talk to.
gp_check_kubelet() {
	gp_kubelet_endpoints >"$GP_STAGE/kubelet"
	if [ ! -s "$GP_STAGE/kubelet" ]; then
		gp_say "no kubelet found (process or config): cannot check which containerd it uses"
		return 0
	fi
	gp_want=$(gp_norm_socket "$P_SOCKET")
	gp_seen=
	while IFS="$GP_TAB" read -r gp_src gp_ep; do
		[ "$(gp_norm_socket "$gp_ep")" = "$gp_want" ] && return 0
		gp_seen="$gp_seen $gp_ep (${gp_src#"$GP_ROOT"})"
	done <"$GP_STAGE/kubelet"
	gp_fail 2 "refused: the kubelet talks to containerd at$gp_seen, but the plan configures the containerd serving $P_SOCKET, a different daemon (FM17); set \`gpuplane:cluster.distro\` (and for k8s-snap \`gpuplane:cluster.containerdBaseDir\`) to match this node; nothing changed"
}

# ---------------------------------------------------------------------------------------
# Results

gp_runtimes_json() { # NAME: "default_runtime", "cdi" and "runtimes" members
	awk -F '\t' "$GP_AWK_JSTR"'
		$1 == "default" { def = $2 }
		$1 == "cdi" { cdi = $2 }
		$1 == "runtime" {
			rt = rt sep jstr($2) ": {\"runtime_type\": " jstr($3) ", \"binary_name\": " jstr($4) \
				", \"systemd_cgroup\": " ($5 == "true" ? "true" : "false") "}"
			sep = ", "
		}
		END {
			printf "\"default_runtime\": %s, \"cdi\": %s, \"runtimes\": {%s}", jstr(def), \
				(cdi == "true" || cdi == "false" ? cdi : "null"), rt
		}' "$GP_STAGE/$1.facts"
}

gp_bases_json() { # the recorded originals as JSON members (null: the file was absent)
	[ -s "$GP_BASES" ] || return 0
	awk -F '\t' "$GP_AWK_JSTR"'
		$1 == "base" {
			printf "%s%s: %s", sep, jstr($2), ($3 == "absent" ? "null" : jstr($3))
			sep = ", "
		}' "$GP_BASES"
}

gp_json_list() { # FILE of lines -> JSON array
	if [ -s "$1" ]; then
		awk "$GP_AWK_JSTR"' { printf "%s%s", sep, jstr($0); sep = ", " }' "$1"
	fi
}

# gp_json_result OK ERROR RESTORED: the one JSON object apply and restore print.
gp_json_result() {
	gp_now_ms
	{
		printf '{"mode": %s, "ok": %s' "$(gp_js "$GP_MODE")" "$1"
		[ -n "$2" ] && printf ', "error": %s' "$(gp_js "$2")"
		[ -n "$3" ] && printf ', "restored": %s' "$3"
		printf ', "changed": %s, "restarted": %s' "${GP_CHANGED:-false}" \
			"$([ "$GP_RESTARTED" = 1 ] && echo true || echo false)"
		printf ', "written": [%s]' "$(gp_json_list "$GP_STAGE/written" 2>/dev/null)"
		[ -s "$GP_STAGE/kept" ] && printf ', "kept": [%s]' "$(gp_json_list "$GP_STAGE/kept")"
		gp_units_json
		printf ', "plan_id": %s, "distro": %s, "config": %s' "$(gp_js "$P_ID")" \
			"$(gp_js "$P_DISTRO")" "$(gp_js "$P_CONFIG")"
		if [ -n "${GP_FINAL:-}" ] && [ -f "$GP_STAGE/$GP_FINAL.facts" ]; then
			printf ', %s, "config_sha256": %s' "$(gp_runtimes_json "$GP_FINAL")" \
				"$(gp_js "$(cat "$GP_STAGE/$GP_FINAL.sha")")"
		fi
		printf ', "timings_ms": {"total": %s' "$((GP_MS - GP_T0))"
		[ -n "$GP_T_RESTART" ] && printf ', "restart": %s' "$GP_T_RESTART"
		[ -n "$GP_T_READY" ] && printf ', "cri_ready": %s' "$GP_T_READY"
		printf '}}\n'
	} 2>/dev/null
}

# ---------------------------------------------------------------------------------------
# Common set-up for every mode that changes files

gp_tools() {
	for gp_tool in sha256sum awk sed cp mv mktemp readlink find ln; do
		command -v "$gp_tool" >/dev/null 2>&1 || {
			gp_say "'$gp_tool' is missing on this node; nothing changed"
			exit 2
		}
	done
}

# The restart command: --restart-cmd, else the plan's units (the one active on the node),
# else the plan's command, else the one the state recorded (restore, recovery).
gp_select_restart() {
	GP_RESTART=$GP_OPT_RESTART
	[ -n "$GP_RESTART" ] && return 0
	if [ -n "$P_UNITS" ]; then
		gp_detect_unit
		return 0
	fi
	GP_RESTART=${P_RESTART:-$S_RESTART}
}

# gp_detect_unit: which of the plan's systemd units runs this node's containerd (RKE2
# agent or server, K3s agent or server, k0s worker or controller). Exactly one must be
# active: restarting a unit that is not running starts a second Kubernetes node process,
# and with two active gpuplane cannot tell which one owns the containerd it configures.
gp_detect_unit() {
	gp_du_list=$(printf '%s' "$P_UNITS" | tr '\n' ' ' | sed 's/ $//')
	if ! command -v systemctl >/dev/null 2>&1; then
		gp_fail 2 "refused: $P_DISTRO restarts containerd through its systemd unit ($gp_du_list), but systemctl is not available on this node; pass --restart-cmd; nothing changed"
	fi
	gp_du_active=
	gp_du_n=0
	gp_du_ifs=$IFS
	IFS=$GP_NL
	for gp_du in $P_UNITS; do
		IFS=$gp_du_ifs
		[ -n "$gp_du" ] || continue
		if systemctl is-active --quiet "$gp_du" </dev/null >/dev/null 2>&1; then
			gp_du_active="$gp_du_active${gp_du_active:+ }$gp_du"
			gp_du_n=$((gp_du_n + 1))
		fi
	done
	IFS=$gp_du_ifs
	case $gp_du_n in
	1)
		GP_RESTART="systemctl restart $gp_du_active"
		P_RESTART=$GP_RESTART
		gp_say "$gp_du_active is the active $P_DISTRO unit on this node: it is the one restarted"
		;;
	0) gp_fail 2 "refused: none of the $P_DISTRO units ($gp_du_list) is active on this node (systemctl is-active), so gpuplane cannot tell which one runs its containerd; start $P_DISTRO on this node or check \`gpuplane:cluster.distro\`; nothing changed" ;;
	*) gp_fail 2 "refused: several $P_DISTRO units are active on this node ($gp_du_active); each runs its own containerd and gpuplane cannot tell which one the plan is for; stop the one this node should not run; nothing changed" ;;
	esac
}

# gp_resolve NODEPATH: the node path NODEPATH leads to, following symbolic links in any
# component inside the root (RKE2's bin/ is a link into data/<digest>/bin).
gp_resolve() {
	gp_rv_todo=${1#/}
	gp_rv_done=
	gp_rv_hops=0
	while [ -n "$gp_rv_todo" ]; do
		gp_rv_c=${gp_rv_todo%%/*}
		case $gp_rv_todo in
		*/*) gp_rv_todo=${gp_rv_todo#*/} ;;
		*) gp_rv_todo= ;;
		esac
		case $gp_rv_c in
		'' | .) continue ;;
		..)
			gp_rv_done=${gp_rv_done%/*}
			continue
			;;
		esac
		if [ -L "$GP_ROOT$gp_rv_done/$gp_rv_c" ]; then
			gp_rv_hops=$((gp_rv_hops + 1))
			[ "$gp_rv_hops" -le 40 ] || return 1
			gp_rv_t=$(readlink "$GP_ROOT$gp_rv_done/$gp_rv_c") || return 1
			case $gp_rv_t in /*) gp_rv_done= ;; esac
			gp_rv_todo=${gp_rv_t#/}${gp_rv_todo:+/$gp_rv_todo}
		else
			gp_rv_done=$gp_rv_done/$gp_rv_c
		fi
	done
	printf '%s\n' "${gp_rv_done:-/}"
}

# gp_find_containerd: GP_CONTAINERD, the binary that checks configs: --containerd, else
# the first of the plan's places that holds an executable (links followed), else the one
# on PATH. P_CONTAINERD becomes the place used (the state records it).
gp_find_containerd() {
	GP_CONTAINERD=$GP_OPT_CONTAINERD
	if [ -n "$GP_CONTAINERD" ]; then
		[ -x "$GP_CONTAINERD" ]
		return
	fi
	gp_fc_ifs=$IFS
	IFS=$GP_NL
	for gp_fc in $P_CONTAINERD; do
		IFS=$gp_fc_ifs
		[ -n "$gp_fc" ] || continue
		gp_fc_real=$(gp_resolve "$gp_fc") || continue
		if [ -f "$GP_ROOT$gp_fc_real" ] && [ -x "$GP_ROOT$gp_fc_real" ]; then
			GP_CONTAINERD=$GP_ROOT$gp_fc_real
			P_CONTAINERD=$gp_fc
			[ "$gp_fc_real" = "$gp_fc" ] || GP_CONTAINERD_NOTE="$gp_fc -> $gp_fc_real"
			return 0
		fi
	done
	IFS=$gp_fc_ifs
	GP_CONTAINERD=$(command -v containerd 2>/dev/null)
	if [ -n "$GP_CONTAINERD" ]; then
		GP_CONTAINERD_NOTE="$(printf '%s' "$P_CONTAINERD" | tr '\n' ' ')not found, using $GP_CONTAINERD on PATH"
		return 0
	fi
	return 1
}

gp_select_containerd() {
	GP_CONTAINERD_NOTE=
	if ! gp_find_containerd; then
		gp_fc_list=$(printf '%s' "${GP_OPT_CONTAINERD:-$P_CONTAINERD}" | tr '\n' ' ' | sed 's/ $//')
		gp_fail 2 "refused: no containerd binary at $gp_fc_list (nor on PATH): the merged config cannot be checked (pass --containerd); nothing changed"
	fi
	[ -n "$GP_CONTAINERD_NOTE" ] && gp_say "containerd: $GP_CONTAINERD_NOTE"
	:
}

# Verify the staged payload: every file arrived whole.
gp_verify_payload() {
	if [ "$GP_HAVE_PLAN" != 1 ] || [ -z "$P_CONFIG" ] || [ -z "$P_ID" ]; then
		gp_say "apply needs a plan: pipe the program from gpuplane.agent.script.apply_stdin to 'sh -s -- apply'"
		exit 2
	fi
	while IFS="$GP_TAB" read -r gp_vp_path gp_vp_sha gp_vp_file; do
		gp_vp_got=$(gp_sha "$gp_vp_file")
		if [ "$gp_vp_got" != "$gp_vp_sha" ]; then
			gp_fail 2 "payload: $gp_vp_path arrived damaged (sha256 $gp_vp_got, expected $gp_vp_sha); nothing changed"
		fi
		gp_vp_ok=0
		gp_vp_ifs=$IFS
		IFS=$GP_NL
		for gp_vp_edit in $P_EDITS; do
			case $gp_vp_edit in
			*/) case $gp_vp_path in "$gp_vp_edit"*) gp_vp_ok=1 ;; esac ;;
			*) [ "$gp_vp_path" = "$gp_vp_edit" ] && gp_vp_ok=1 ;;
			esac
		done
		IFS=$gp_vp_ifs
		if [ "$gp_vp_ok" != 1 ]; then
			gp_fail 2 "payload: $gp_vp_path is outside the files $P_DISTRO lets gpuplane edit ($(printf '%s' "$P_EDITS" | tr '\n' ' ')); nothing changed"
		fi
		if [ -L "$GP_ROOT$gp_vp_path" ]; then
			gp_fail 2 "refused: $gp_vp_path is a symbolic link; gpuplane replaces regular files only; nothing changed"
		fi
	done <"$GP_STAGE/files"
}

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

# ---------------------------------------------------------------------------------------
# The ending apply and restore share, once the run's files are written: containerd's own
# check of the config the node will read, a restart only when the effective config
# changed, Docker's check and single restart when its file changed, then the mode's
# record and the commit.

# gp_settle CHECK RECORD DONE: end an apply or a restore (GP_MODE) whose writes are done
# and journalled. The caller sets gp_need_restart (1: containerd's files changed) and
# gp_before_ok (1: the dump `before` is what the node ran). CHECK NAME says whether the
# dump NAME keeps what the mode promises (GP_CHECK_ERR when not); RECORD writes the
# mode's state inside the transaction; DONE runs after the commit. Any failure before the
# commit rolls the run back (gp_fail); success prints the result and exits 0.
gp_settle() {
	if [ "$GP_MODE" = apply ]; then
		gp_se_config='the new config' gp_se_kept='nothing was restarted'
		gp_se_bad='the new config would break containerd'
		gp_se_bad_final='the effective config is wrong'
	else
		gp_se_config='the original config' gp_se_kept="gpuplane's files were kept"
		gp_se_bad='the original config would not serve'
		gp_se_bad_final='the original config does not serve'
	fi
	gp_preview_path || gp_fail 1 "cannot preview $P_CONFIG from $P_TEMPLATE"
	if [ -n "$GP_PREVIEW" ]; then
		gp_dump "$GP_PREVIEW" after ||
			gp_fail 1 "containerd refuses $gp_se_config ($GP_DUMP_ERR); $gp_se_kept"
		gp_preview_done
		# a failed restore reports the config it refused; apply, the one the node keeps
		[ "$GP_MODE" = apply ] || GP_FINAL=after
		"$1" after || gp_fail 1 "$gp_se_bad: $GP_CHECK_ERR; $gp_se_kept"
		GP_FINAL=after
		[ "$gp_before_ok" = 1 ] &&
			[ "$(cat "$GP_STAGE/after.sha")" = "$(cat "$GP_STAGE/before.sha")" ] && gp_need_restart=0
	fi
	# Only Docker's file changed: containerd has nothing new to read.
	gp_ctd_touched "$GP_STAGE/touch" || gp_need_restart=0
	gp_docker_now=0
	if gp_docker_touched "$GP_STAGE/touch"; then
		gp_docker_now=1
		gp_docker_check
	fi
	gp_step verified

	if [ "$gp_need_restart" = 1 ]; then
		gp_txn_phase restart || gp_fail 1 "cannot write the journal's phase under $GP_TXN"
		gp_step restart
		gp_restart || gp_fail 1 "containerd did not come back on $gp_se_config: $GP_RESTART_ERR"
		gp_step restarted
		# What the daemon read (for template distros: the config it regenerated).
		gp_dump "$P_CONFIG" final ||
			gp_fail 1 "after the restart containerd refuses $P_CONFIG ($GP_DUMP_ERR)"
		"$1" final || gp_fail 1 "after the restart $gp_se_bad_final: $GP_CHECK_ERR"
		GP_FINAL=final
	elif [ "$GP_MODE" = apply ]; then
		gp_say "the effective config did not change: containerd is not restarted"
	fi
	[ "$gp_docker_now" = 1 ] && gp_docker_apply_restart

	"$2"
	gp_txn_commit
	gp_step committed
	"$3"
	gp_json_result true "" ""
	exit 0
}
# ---------------------------------------------------------------------------------------
# apply

gp_apply() {
	gp_tools
	gp_verify_payload
	gp_lock
	gp_state_reset
	gp_load_state
	gp_select_restart
	gp_recover
	gp_docker_select
	gp_select_containerd
	gp_detect
	gp_check_kubelet
	gp_have=$(gp_containerd_version)
	if [ -n "$P_VERSION" ] && [ -n "$gp_have" ] && [ "$gp_have" != "$P_VERSION" ]; then
		gp_fail 2 "refused: this node runs containerd $gp_have but the plan was made for $P_VERSION, whose merge rules differ; set \`gpuplane:cluster.containerdVersion: \"$gp_have\"\`; nothing changed"
	fi

	# What the node runs now.
	GP_FINAL=before
	if ! gp_dump "$P_CONFIG" before; then
		GP_FINAL=
		gp_fail 2 "refused: the node's current containerd config does not load ($GP_DUMP_ERR); gpuplane does not build on a broken config; nothing changed"
	fi
	gp_before_def=$(gp_default_of before)
	gp_before_sha=$(cat "$GP_STAGE/before.sha")

	# Which files differ: planned ones, and managed ones the plan no longer has.
	: >"$GP_STAGE/touch"
	: >"$GP_STAGE/written"
	while IFS="$GP_TAB" read -r gp_ap_path gp_ap_sha gp_ap_file; do
		[ "$(gp_sha "$GP_ROOT$gp_ap_path")" = "$gp_ap_sha" ] && continue
		# gpuplane wrote this very file and another writer (the toolkit) only reformatted
		# it: it is as planned, and rewriting it would only undo that writer's format.
		if [ "$(gp_manifest_sha "$gp_ap_path")" = "$gp_ap_sha" ] &&
			gp_data_equal "$gp_ap_path" "$gp_ap_file"; then
			gp_say "$gp_ap_path was rewritten by another writer with the same TOML data as planned (the NVIDIA toolkit does this): left as it is"
			continue
		fi
		printf '%s\n' "$gp_ap_path" >>"$GP_STAGE/touch"
	done <"$GP_STAGE/files"
	gp_manifest_files >"$GP_STAGE/managed" 2>/dev/null
	: >"$GP_STAGE/dropped"
	while IFS= read -r gp_ap_path; do
		[ -n "$gp_ap_path" ] || continue
		awk -F '\t' -v p="$gp_ap_path" '$1 == p { f = 1 } END { exit !f }' "$GP_STAGE/files" &&
			continue
		printf '%s\n' "$gp_ap_path" >>"$GP_STAGE/dropped"
		[ "$(gp_saved_sha "$gp_ap_path" "$GP_ORIG")" = "$(gp_sha "$GP_ROOT$gp_ap_path")" ] ||
			printf '%s\n' "$gp_ap_path" >>"$GP_STAGE/touch"
	done <"$GP_STAGE/managed"

	if [ ! -s "$GP_STAGE/touch" ]; then
		# Nothing to write. Still check what the node runs keeps the plan's promises.
		GP_CHANGED=false
		if ! gp_check before "$P_DEFAULT"; then
			gp_fail 1 "the files are as planned, but the effective config does not keep the plan: $GP_CHECK_ERR; another writer may have changed the node (FM05)"
		fi
		gp_units_apply
		if [ -f "$GP_MANIFEST" ] && ! gp_commit_manifest ||
			! gp_commit_state "$gp_before_sha" "$gp_before_def"; then
			gp_fail 1 "the node already has the planned files, but gpuplane cannot record this plan in $GP_STATE (full or read-only?); nothing was changed"
		fi
		[ -f "$GP_STATEFILE" ] || gp_clean_state
		gp_say "nothing to change: the node already has the planned files"
		gp_json_result true "" ""
		exit 0
	fi
	# Before anything is written: the plan must come from the node's own originals, and
	# the files gpuplane manages must still be as it wrote them.
	gp_check_bases
	gp_check_managed
	GP_CHANGED=true
	# The host units first: undone by any failure below (gp_fail).
	gp_units_apply

	# Write-ahead: nothing on the node changes until the journal that undoes the run and
	# the originals a later restore needs are written, flushed and renamed into place. If
	# they cannot be (a full, read-only or failing disk), stop with the node untouched.
	# The agent first: from here on `restore` (Pulumi's delete runs the installed copy) can
	# undo whatever this run leaves.
	gp_install_self || gp_fail_unchanged "cannot install the agent in $GP_STATE"
	gp_step checked
	gp_txn_begin apply "$GP_STAGE/touch" ||
		gp_fail_unchanged "cannot write the journal under $GP_TXN"
	gp_step journal
	gp_keep_originals ||
		gp_fail 1 "cannot keep the originals under $GP_ORIG (is $GP_STATE full or read-only?)"
	gp_step originals

	gp_ap_n=0
	while IFS="$GP_TAB" read -r gp_ap_path gp_ap_sha gp_ap_file; do
		grep -q -x -F -e "$gp_ap_path" "$GP_STAGE/touch" || continue
		gp_mkparents "$gp_ap_path" "$GP_TXN/dirs" || gp_fail 1 "cannot create the directory of $gp_ap_path"
		gp_put "$gp_ap_file" "$gp_ap_path" || gp_fail 1 "cannot write $gp_ap_path"
		GP_NODE_TOUCHED=1
		printf '%s\n' "$gp_ap_path" >>"$GP_STAGE/written"
		gp_ap_n=$((gp_ap_n + 1))
		gp_step "write-$gp_ap_n"
	done <"$GP_STAGE/files"
	while IFS= read -r gp_ap_path; do
		grep -q -x -F -e "$gp_ap_path" "$GP_STAGE/touch" || continue
		gp_put_saved "$gp_ap_path" "$GP_ORIG" || gp_fail 1 "cannot put back the original of $gp_ap_path"
		GP_NODE_TOUCHED=1
		printf '%s\n' "$gp_ap_path" >>"$GP_STAGE/written"
		gp_ap_n=$((gp_ap_n + 1))
		gp_step "write-$gp_ap_n"
	done <"$GP_STAGE/dropped"
	gp_sync

	# Check the new config with the node's own containerd before anything restarts
	# (gp_settle), each written drop-in first where the distribution merges them.
	if [ -n "$P_RENDERED" ]; then
		# Only the distribution's restart merges the drop-ins: before it, containerd
		# checks that it reads each written file; after it, the merged config is checked
		# like any other (and rolled back when wrong).
		gp_ap_n=0
		while IFS="$GP_TAB" read -r gp_ap_path _ gp_ap_file; do
			gp_ap_n=$((gp_ap_n + 1))
			[ "$gp_ap_path" = "$GP_DOCKER_FILE" ] && continue
			gp_dump_host "$gp_ap_file" "written-$gp_ap_n" ||
				gp_fail 1 "containerd refuses $gp_ap_path ($GP_DUMP_ERR); nothing was restarted"
		done <"$GP_STAGE/files"
	fi
	gp_want_def=${P_DEFAULT:-$gp_before_def}
	gp_before_ok=1
	gp_need_restart=1
	gp_settle gp_apply_check gp_apply_record gp_apply_done
}

# gp_apply_check NAME: the dump NAME keeps the plan's runtimes and default.
gp_apply_check() { gp_check "$1" "$gp_want_def"; }

# gp_apply_record: record what was written and the originals the plan was checked
# against, forget files the plan dropped. A record that cannot be written undoes the run:
# the node is never left changed without the state that restores it.
gp_apply_record() {
	gp_commit_manifest || gp_fail 1 "cannot record the managed files in $GP_MANIFEST"
	gp_step manifest
	gp_commit_bases || gp_fail 1 "cannot record the plan's bases in $GP_BASES"
	gp_commit_state "$(cat "$GP_STAGE/$GP_FINAL.sha")" "$gp_before_def" ||
		gp_fail 1 "cannot record the applied plan in $GP_STATEFILE"
	gp_step state
}

# gp_apply_done: a plan that left gpuplane nothing to manage keeps no state.
gp_apply_done() { [ -f "$GP_STATEFILE" ] || gp_clean_state; }

# gp_keep_originals: the originals of the files this run touches that gpuplane does not
# manage yet, kept until restore, and listed in the manifest (as not yet written, "-").
gp_keep_originals() {
	mkdir -p "$GP_ORIG" || return 1
	{ [ -f "$GP_MANIFEST" ] && cat "$GP_MANIFEST"; } >"$GP_STAGE/manifest.pre"
	while IFS= read -r gp_ko; do
		[ -n "$gp_ko" ] || continue
		awk -F '\t' -v p="$gp_ko" '$1 == "file" && $2 == p { f = 1 } END { exit !f }' \
			"$GP_STAGE/manifest.pre" && continue
		gp_save "$gp_ko" "$GP_ORIG" || return 1
		printf 'file\t%s\t-\n' "$gp_ko" >>"$GP_STAGE/manifest.pre"
	done <"$GP_STAGE/touch"
	gp_sync
	if [ "$(gp_sha "$GP_STAGE/manifest.pre")" != "$(gp_sha "$GP_MANIFEST")" ]; then
		gp_write_atomic "$GP_MANIFEST" <"$GP_STAGE/manifest.pre" || return 1
	fi
	gp_install_self
}

# gp_fail_unchanged MESSAGE: the journal could not be written, so nothing was changed;
# what this run created in the state dir goes with it.
gp_fail_unchanged() {
	[ -f "$GP_STATEFILE" ] || gp_clean_state
	gp_fail 1 "$1; nothing was changed"
}

# The manifest lists the planned files gpuplane has an original of (a planned file that
# already had the planned bytes was never changed, so restore leaves it alone).
gp_commit_manifest() {
	{
		while IFS="$GP_TAB" read -r gp_cm_path gp_cm_sha _; do
			[ -e "$GP_ORIG$gp_cm_path" ] || [ -e "$GP_ORIG$gp_cm_path.gpuplane-absent" ] ||
				continue
			printf 'file\t%s\t%s\n' "$gp_cm_path" "$gp_cm_sha"
		done <"$GP_STAGE/files"
		awk -F '\t' '$1 == "dir"' "$GP_MANIFEST" 2>/dev/null
		awk '{ print "dir\t" $0 }' "$GP_TXN/dirs" 2>/dev/null
	} >"$GP_STAGE/manifest.new"
	if [ "$(gp_sha "$GP_STAGE/manifest.new")" != "$(gp_sha "$GP_MANIFEST")" ]; then
		gp_write_atomic "$GP_MANIFEST" <"$GP_STAGE/manifest.new" || return 1
	fi
	gp_keep_wrote
}

# gp_keep_wrote: keep the bytes of the top-level config as gpuplane wrote it, to tell a
# data-equal rewrite from a real change later (gp_data_equal).
gp_keep_wrote() {
	gp_kw_top=$(gp_top_path)
	gp_kw_file=$(awk -F '\t' -v p="$gp_kw_top" '$1 == p { print $3 }' "$GP_STAGE/files")
	gp_kw_copy=$(gp_wrote_copy "$gp_kw_top")
	if [ -z "$gp_kw_file" ] || ! awk -F '\t' -v p="$gp_kw_top" \
		'$1 == "file" && $2 == p { f = 1 } END { exit !f }' "$GP_STAGE/manifest.new"; then
		rm -rf "$GP_STATE/wrote"
		return 0
	fi
	[ "$(gp_sha "$gp_kw_file")" = "$(gp_sha "$gp_kw_copy")" ] && return 0
	gp_write_atomic "$gp_kw_copy" <"$gp_kw_file"
}

# gp_commit_state CONFIG_SHA DEFAULT_BEFORE: remember the plan; the default runtime the
# node had before gpuplane's first change is kept from the first run.
gp_commit_state() {
	gp_cs_orig=${S_ORIGINAL_DEFAULT:-$2}
	if [ ! -s "$GP_MANIFEST" ]; then
		# gpuplane manages nothing here: no state to keep (the rest goes after the commit)
		rm -f "$GP_STATEFILE"
		return
	fi
	gp_install_self || return 1
	gp_state_text "$1" "$gp_cs_orig" >"$GP_STAGE/state.new" || return 1
	if [ "$(gp_sha "$GP_STAGE/state.new")" != "$(gp_sha "$GP_STATEFILE")" ]; then
		gp_write_atomic "$GP_STATEFILE" <"$GP_STAGE/state.new" || return 1
	fi
}

# ---------------------------------------------------------------------------------------
# Bases: the originals a plan was made from. The first apply that writes anything records
# each ("base<TAB>path<TAB>sha256|absent" lines in $GP_BASES, a byte copy under
# $GP_BASEDIR); later applies compare against that record, not against gpuplane's own
# output or the config a template distro regenerated from gpuplane's template. Restore
# forgets it with the rest of the state.

# gp_word SHA: a digest as the messages say it.
gp_word() {
	case $1 in
	- | absent) printf 'absent' ;;
	'') printf 'unreadable' ;;
	*) printf 'sha256 %s' "$1" ;;
	esac
}

# gp_recorded_base PATH: the recorded original's digest ("absent"), empty when none.
gp_recorded_base() {
	[ -f "$GP_BASES" ] || return 0
	awk -F '\t' -v p="$1" '$1 == "base" && $2 == p { print $3; exit }' "$GP_BASES"
}

# gp_check_bases: refuse unless the node's original of every base is the one the plan
# was made from. The original is the recorded one, else the one kept for a file gpuplane
# already manages, else the file on the node now. Leaves $GP_STAGE/bases.new (what
# gp_commit_bases records) and copies of originals not yet recorded in $GP_STAGE/originals.
gp_check_bases() {
	: >"$GP_STAGE/bases.new"
	while IFS="$GP_TAB" read -r gp_cb_path gp_cb_want; do
		gp_cb_keep=
		gp_cb_have=$(gp_recorded_base "$gp_cb_path")
		if [ -n "$gp_cb_have" ]; then
			gp_cb_keep=$GP_BASEDIR$gp_cb_path
		elif [ -e "$GP_ORIG$gp_cb_path" ] || [ -e "$GP_ORIG$gp_cb_path.gpuplane-absent" ]; then
			gp_cb_have=$(gp_saved_sha "$gp_cb_path" "$GP_ORIG")
			gp_cb_keep=$GP_ORIG$gp_cb_path
			gp_copy_saved "$gp_cb_path" "$GP_ORIG" "$GP_STAGE/originals" ||
				gp_fail 2 "cannot copy the original of $gp_cb_path; nothing changed"
		else
			gp_cb_have=$(gp_sha "$GP_ROOT$gp_cb_path")
			gp_save "$gp_cb_path" "$GP_STAGE/originals" ||
				gp_fail 2 "cannot read $gp_cb_path; nothing changed"
		fi
		[ "$gp_cb_have" = - ] && gp_cb_have=absent
		printf 'base\t%s\t%s\n' "$gp_cb_path" "$gp_cb_have" >>"$GP_STAGE/bases.new"
		[ "$gp_cb_have" = "$gp_cb_want" ] && continue
		# A planned file the node already has byte for byte: nothing in it is replaced.
		gp_cb_plan=$(awk -F '\t' -v p="$gp_cb_path" '$1 == p { print $2 }' "$GP_STAGE/files")
		[ -n "$gp_cb_plan" ] && [ "$(gp_sha "$GP_ROOT$gp_cb_path")" = "$gp_cb_plan" ] && continue
		if [ -n "$gp_cb_plan" ] && gp_data_equal "$gp_cb_path" \
			"$(awk -F '\t' -v p="$gp_cb_path" '$1 == p { print $3 }' "$GP_STAGE/files")"; then
			continue
		fi
		gp_cb_hint=
		if [ -n "$gp_cb_keep" ]; then
			gp_cb_now=$(gp_sha "$GP_ROOT$gp_cb_path")
			gp_cb_same=
			[ "$gp_cb_now" = "$gp_cb_want" ] && gp_cb_same=" (this plan was made from it)"
			if [ "$gp_cb_have" = absent ]; then
				gp_cb_hint=". gpuplane already manages this node, so its current $gp_cb_path holds gpuplane's own edits$gp_cb_same; the node had no $gp_cb_path before gpuplane changed it: leave it out of the captured files"
			else
				gp_cb_hint=". gpuplane already manages this node, so its current $gp_cb_path holds gpuplane's own edits$gp_cb_same; capture the original, which gpuplane keeps at $gp_cb_keep"
			fi
		elif [ -n "$S_ID" ] && [ ! -f "$GP_BASES" ]; then
			gp_cb_hint=". gpuplane changed this node before it recorded the originals (plan $S_ID), so its files may hold gpuplane's edits (a template distro regenerates $P_CONFIG from gpuplane's template): restore the node first (\`sh $GP_STATE/agent.sh restore\`), then capture"
		fi
		gp_fail 2 "refused: this plan was made from a different $gp_cb_path (plan: $(gp_word "$gp_cb_want"); node's original: $(gp_word "$gp_cb_have")); applying it would replace settings the plan has not seen. Fix: capture the node's file into the stack (\`gpuplane:cluster.baselineFiles\` or \`gpuplane:nodes[N].baselineFiles\`, see docs/first-rollout.md, 'Planning from the node's own files') and plan again$gp_cb_hint; nothing changed"
	done <"$GP_STAGE/bases.plan"
}

# gp_check_managed: FM05. A file gpuplane manages that another writer changed since
# gpuplane wrote it is neither overwritten nor put back to its original behind that
# writer's back ("-": written by a run that was rolled back, nothing to compare).
gp_check_managed() {
	[ -f "$GP_MANIFEST" ] || return 0
	while IFS= read -r gp_km_path; do
		gp_km_wrote=$(awk -F '\t' -v p="$gp_km_path" \
			'$1 == "file" && $2 == p { print $3; exit }' "$GP_MANIFEST")
		case $gp_km_wrote in '' | -) continue ;; esac
		gp_km_now=$(gp_sha "$GP_ROOT$gp_km_path")
		[ "$gp_km_now" = "$gp_km_wrote" ] && continue
		gp_data_equal "$gp_km_path" "$(gp_wrote_copy "$gp_km_path")" && continue
		gp_fail 2 "refused: $gp_km_path changed on the node since gpuplane wrote it (FM05: another writer; node: $(gp_word "$gp_km_now"), gpuplane wrote: $(gp_word "$gp_km_wrote")); applying would overwrite that change. Fix: find the writer (\`sh $GP_STATE/agent.sh status\` lists drifted files); if the change is unwanted, undo it and apply again; if it must stay, restore the node (\`sh $GP_STATE/agent.sh restore\` puts gpuplane's originals back), make the change in the node's own files, capture them into the stack and plan again; nothing changed"
	done <"$GP_STAGE/touch"
}

# gp_copy_saved NODEPATH FROM TO: copy what gp_save kept under FROM to TO.
gp_copy_saved() {
	mkdir -p "$(dirname "$3$1")" || return 1
	rm -f "$3$1" "$3$1.gpuplane-absent"
	if [ -e "$2$1.gpuplane-absent" ]; then
		: >"$3$1.gpuplane-absent"
	else
		cp -p "$2$1" "$3$1" || {
			rm -f "$3$1"
			return 1
		}
	fi
}

# gp_commit_bases: record what gp_check_bases compared against (a recorded original stays
# as it was); paths the plan no longer derives from are forgotten. A plan without bases
# leaves the record alone.
gp_commit_bases() {
	[ -s "$GP_STAGE/bases.plan" ] || return 0
	mkdir -p "$GP_BASEDIR" || return 1
	while IFS="$GP_TAB" read -r _ gp_cbs_path _; do
		[ -e "$GP_BASEDIR$gp_cbs_path" ] || [ -e "$GP_BASEDIR$gp_cbs_path.gpuplane-absent" ] &&
			continue
		if [ -e "$GP_STAGE/originals$gp_cbs_path" ] ||
			[ -e "$GP_STAGE/originals$gp_cbs_path.gpuplane-absent" ]; then
			gp_copy_saved "$gp_cbs_path" "$GP_STAGE/originals" "$GP_BASEDIR" || return 1
		fi
	done <"$GP_STAGE/bases.new"
	if [ "$(gp_sha "$GP_STAGE/bases.new")" != "$(gp_sha "$GP_BASES")" ]; then
		gp_write_atomic "$GP_BASES" <"$GP_STAGE/bases.new" || return 1
	fi
}

# ---------------------------------------------------------------------------------------
# Host units (`gp_plan mask_unit NAME`): systemd units the plan stops, disables and masks,
# e.g. the preinstalled driver's nvidia-imex.service, which must not hold the IMEX session
# the DRA driver's ComputeDomain daemon needs (FM35). Nothing here touches containerd.
#
# Before a unit is changed, its state as found (`is-enabled`, and `is-active` where systemd
# runs) is recorded in $GP_UNITS ("id<TAB>plan" and "unit<TAB>name<TAB>state<TAB>active"
# lines), flushed and renamed into place: restore, a failed apply and an apply whose plan
# no longer masks the unit put exactly that state back (unmask; enable and start only if
# it was so), and a run killed half-way leaves a record the next run completes and
# restore undoes. A unit that was masked already, or that the node does not have, is left
# alone and not recorded. Unit files change through `systemctl [--root=ROOT]` (offline
# against a stand-in root); stopping and starting need systemd as PID 1 and no --root, and
# the run says so where they cannot happen.

# gp_sysctl ARGS...: systemctl on the node (on the unit files under --root).
gp_sysctl() {
	if [ -n "$GP_ROOT" ]; then
		systemctl --root="$GP_ROOT" "$@" </dev/null
	else
		systemctl "$@" </dev/null
	fi
}

# gp_unit_live: units can be stopped and started (systemd is PID 1, as sd_booted tests,
# and the agent works on the node itself, not on a stand-in root).
gp_unit_live() { [ -z "$GP_ROOT" ] && [ -d /run/systemd/system ]; }

gp_unit_offline() {
	if [ -n "$GP_ROOT" ]; then
		printf 'no systemd manages the units under --root %s' "$GP_ROOT"
	else
		printf 'systemd is not running as PID 1 here'
	fi
}

# gp_unit_state NAME: its unit file state (enabled, disabled, static, masked, ...), or
# "absent": no such unit (systemd < 254 prints nothing, later ones "not-found"), or no
# systemctl on the node at all.
gp_unit_state() {
	command -v systemctl >/dev/null 2>&1 || {
		echo absent
		return 0
	}
	gp_us=$(gp_sysctl is-enabled "$1" 2>/dev/null)
	gp_us=${gp_us%%"$GP_NL"*}
	case $gp_us in '' | not-found) gp_us=absent ;; esac
	printf '%s\n' "$gp_us"
}

# gp_unit_active NAME: active | inactive, or unknown where systemd does not run.
gp_unit_active() {
	if ! gp_unit_live; then
		echo unknown
		return 0
	fi
	case $(systemctl is-active "$1" </dev/null 2>/dev/null) in
	active | activating | reloading) echo active ;;
	*) echo inactive ;;
	esac
}

gp_units_recorded() { # NAME: "state<TAB>active" as recorded, nothing when not recorded
	[ -f "$GP_UNITS" ] && awk -F '\t' -v u="$1" '$1 == "unit" && $2 == u { print $3 "\t" $4; exit }' "$GP_UNITS"
}

# gp_units_commit FILE: FILE's unit lines become the record, with this plan's id (the
# record goes when none is left).
gp_units_commit() {
	if ! awk -F '\t' '$1 == "unit" { f = 1 } END { exit !f }' "$1"; then
		rm -f "$GP_UNITS"
		return
	fi
	{
		printf 'id\t%s\n' "${GP_UNITS_ID:-$P_ID}"
		awk -F '\t' '$1 == "unit"' "$1"
	} >"$GP_STAGE/units.rec" && gp_write_atomic "$GP_UNITS" <"$GP_STAGE/units.rec"
}

# gp_units_forget NAME: drop NAME from the record.
gp_units_forget() {
	awk -F '\t' -v u="$1" '!($1 == "unit" && $2 == u)' "$GP_UNITS" >"$GP_STAGE/units.left" &&
		gp_units_commit "$GP_STAGE/units.left"
}

# gp_unit_result NAME BEFORE ACTIVE ACTION: one entry of the result's "units".
gp_unit_result() {
	printf '{"unit": %s, "before": %s, "active_before": %s, "action": %s}\n' "$(gp_js "$1")" \
		"$(gp_js "$2")" "$(gp_js "$3")" "$(gp_js "$4")" >>"$GP_STAGE/units.done"
	gp_say "$1: $4"
}

# gp_unit_mask NAME STATE ACTIVE: stop (where systemd runs), disable, mask; GP_UNIT_DID
# says what was done, GP_UNIT_ERR why not.
gp_unit_mask() {
	GP_UNIT_DID=
	if gp_unit_live; then
		if [ "$3" = active ]; then
			systemctl stop "$1" </dev/null >/dev/null 2>"$GP_STAGE/unit.err" ||
				{ GP_UNIT_ERR="systemctl stop: $(head -n 1 "$GP_STAGE/unit.err")"; return 1; }
			GP_UNIT_DID="stopped, "
		fi
	else
		gp_say "$1: not stopped ($(gp_unit_offline)); masked, it cannot start again"
	fi
	case $2 in
	enabled) gp_um_disable=disable ;;
	enabled-runtime) gp_um_disable="disable --runtime" ;;
	*) gp_um_disable= ;;
	esac
	if [ -n "$gp_um_disable" ]; then
		# shellcheck disable=SC2086 # the verb and its option
		gp_sysctl $gp_um_disable "$1" >/dev/null 2>"$GP_STAGE/unit.err" ||
			{ GP_UNIT_ERR="systemctl $gp_um_disable: $(head -n 1 "$GP_STAGE/unit.err")"; return 1; }
		GP_UNIT_DID="${GP_UNIT_DID}disabled, "
	fi
	gp_sysctl mask "$1" >/dev/null 2>"$GP_STAGE/unit.err" ||
		{ GP_UNIT_ERR="systemctl mask: $(head -n 1 "$GP_STAGE/unit.err")"; return 1; }
	gp_um_now=$(gp_unit_state "$1")
	[ "$gp_um_now" = masked ] ||
		{ GP_UNIT_ERR="systemctl mask left it $gp_um_now"; return 1; }
	GP_UNIT_DID="${GP_UNIT_DID}masked"
}

# gp_unit_put_back NAME STATE ACTIVE: the recorded state again: unmask; enable if it was
# enabled; start if it was running. GP_UNIT_DID / GP_UNIT_ERR as for gp_unit_mask.
gp_unit_put_back() {
	GP_UNIT_DID=
	if [ "$(gp_unit_state "$1")" = masked ]; then
		gp_sysctl unmask "$1" >/dev/null 2>"$GP_STAGE/unit.err" ||
			{ GP_UNIT_ERR="systemctl unmask: $(head -n 1 "$GP_STAGE/unit.err")"; return 1; }
		GP_UNIT_DID=unmasked
	fi
	case $2 in
	enabled) gp_pb_enable=enable ;;
	enabled-runtime) gp_pb_enable="enable --runtime" ;;
	*) gp_pb_enable= ;;
	esac
	if [ -n "$gp_pb_enable" ] && [ "$(gp_unit_state "$1")" != "$2" ]; then
		# shellcheck disable=SC2086 # the verb and its option
		gp_sysctl $gp_pb_enable "$1" >/dev/null 2>"$GP_STAGE/unit.err" ||
			{ GP_UNIT_ERR="systemctl $gp_pb_enable: $(head -n 1 "$GP_STAGE/unit.err")"; return 1; }
		GP_UNIT_DID="${GP_UNIT_DID:+$GP_UNIT_DID, }enabled"
	fi
	gp_pb_now=$(gp_unit_state "$1")
	[ "$gp_pb_now" = "$2" ] ||
		{ GP_UNIT_ERR="it is $gp_pb_now, but it was $2 before gpuplane masked it"; return 1; }
	case $3 in
	active)
		if gp_unit_live; then
			systemctl start "$1" </dev/null >/dev/null 2>"$GP_STAGE/unit.err" ||
				{ GP_UNIT_ERR="systemctl start: $(head -n 1 "$GP_STAGE/unit.err")"; return 1; }
			GP_UNIT_DID="${GP_UNIT_DID:+$GP_UNIT_DID, }started"
		else
			gp_say "$1: was running, but is not started ($(gp_unit_offline))"
		fi
		;;
	unknown) gp_say "$1: not started: whether it ran was not known when gpuplane masked it (no systemd then)" ;;
	esac
	GP_UNIT_DID=${GP_UNIT_DID:-left as it was}
}

# gp_units_apply: mask the plan's units (after every refusal, before containerd's files
# change); put back the recorded ones the plan no longer masks.
gp_units_apply() {
	: >"$GP_STAGE/units.undo"
	[ -n "$P_MASK" ] || [ -f "$GP_UNITS" ] || return 0
	if [ -f "$GP_UNITS" ]; then
		awk -F '\t' '$1 == "unit" { print $2 "\t" $3 "\t" $4 }' "$GP_UNITS" >"$GP_STAGE/units.old"
		while IFS="$GP_TAB" read -r gp_ua_u gp_ua_was gp_ua_act; do
			printf '%s' "$P_MASK" | grep -q -x -F -e "$gp_ua_u" && continue
			gp_unit_put_back "$gp_ua_u" "$gp_ua_was" "$gp_ua_act" ||
				gp_fail 1 "cannot put $gp_ua_u back as it was before gpuplane masked it ($gp_ua_was): $GP_UNIT_ERR"
			gp_units_forget "$gp_ua_u" || gp_fail 1 "cannot update $GP_UNITS"
			GP_CHANGED=true GP_NODE_TOUCHED=1
			gp_unit_result "$gp_ua_u" "$gp_ua_was" "$gp_ua_act" "the plan no longer masks it: $GP_UNIT_DID"
		done <"$GP_STAGE/units.old"
	fi
	gp_ua_ifs=$IFS
	IFS=$GP_NL
	for gp_ua_u in $P_MASK; do
		IFS=$gp_ua_ifs
		gp_ua_now=$(gp_unit_state "$gp_ua_u")
		gp_ua_rec=$(gp_units_recorded "$gp_ua_u")
		if [ -n "$gp_ua_rec" ]; then
			gp_ua_was=${gp_ua_rec%"$GP_TAB"*} gp_ua_act=${gp_ua_rec#*"$GP_TAB"}
			if [ "$gp_ua_now" = masked ]; then
				gp_unit_result "$gp_ua_u" "$gp_ua_was" "$gp_ua_act" "already masked by gpuplane, nothing to do"
				continue
			fi
			gp_say "$gp_ua_u is recorded but not masked (it is $gp_ua_now: unmasked since, or an earlier run stopped before masking it): masking it"
			gp_ua_live=$(gp_unit_active "$gp_ua_u")
		else
			gp_ua_was=$gp_ua_now gp_ua_act=$(gp_unit_active "$gp_ua_u") gp_ua_live=$gp_ua_act
			case $gp_ua_now in
			absent)
				gp_unit_result "$gp_ua_u" absent unknown "absent, nothing to do"
				continue
				;;
			masked | masked-runtime)
				gp_unit_result "$gp_ua_u" "$gp_ua_now" "$gp_ua_act" "already masked (not by gpuplane), nothing to do"
				continue
				;;
			esac
			# write-ahead: the state as found is on disk before the unit changes
			{
				[ -f "$GP_UNITS" ] && cat "$GP_UNITS"
				printf 'unit\t%s\t%s\t%s\n' "$gp_ua_u" "$gp_ua_was" "$gp_ua_act"
			} >"$GP_STAGE/units.new"
			if ! mkdir -p "$GP_STATE" || ! gp_units_commit "$GP_STAGE/units.new" || ! gp_install_self; then
				gp_fail 1 "cannot record the state of $gp_ua_u in $GP_UNITS (is $GP_STATE full or read-only?); nothing was changed"
			fi
			printf '%s\n' "$gp_ua_u" >>"$GP_STAGE/units.undo"
		fi
		gp_step "unit-$gp_ua_u"
		GP_NODE_TOUCHED=1
		gp_unit_mask "$gp_ua_u" "$gp_ua_was" "$gp_ua_live" ||
			gp_fail 1 "cannot mask $gp_ua_u: $GP_UNIT_ERR"
		GP_CHANGED=true
		gp_unit_result "$gp_ua_u" "$gp_ua_was" "$gp_ua_act" "$GP_UNIT_DID"
	done
	IFS=$gp_ua_ifs
	# The record names the plan applied last: restore --plan-id of a replaced plan skips it.
	if [ -f "$GP_UNITS" ] && [ "$(awk -F '\t' '$1 == "id" { print $2; exit }' "$GP_UNITS")" != "$P_ID" ]; then
		gp_units_commit "$GP_UNITS" || gp_fail 1 "cannot record plan $P_ID in $GP_UNITS"
	fi
	return 0
}

# gp_units_undo: a failed apply puts back the units it masked (GP_UNITS_ERR when it
# cannot: the record stays for restore).
gp_units_undo() {
	GP_UNITS_ERR=
	[ -s "${GP_STAGE:-}/units.undo" ] || return 0
	mv -f "$GP_STAGE/units.undo" "$GP_STAGE/units.undoing"
	while IFS= read -r gp_uu; do
		gp_uu_rec=$(gp_units_recorded "$gp_uu")
		[ -n "$gp_uu_rec" ] || continue
		if gp_unit_put_back "$gp_uu" "${gp_uu_rec%"$GP_TAB"*}" "${gp_uu_rec#*"$GP_TAB"}" &&
			gp_units_forget "$gp_uu"; then
			gp_say "$gp_uu: put back as it was ($GP_UNIT_DID)"
		else
			GP_UNITS_ERR="${GP_UNITS_ERR:+$GP_UNITS_ERR; }could not put $gp_uu back as it was (${gp_uu_rec%"$GP_TAB"*}): ${GP_UNIT_ERR:-cannot update $GP_UNITS}; \`sh $GP_STATE/agent.sh restore\` tries again"
		fi
	done <"$GP_STAGE/units.undoing"
}

# gp_units_restore: restore's part: every recorded unit as it was (skipped when a later
# plan than --plan-id recorded them). A unit that cannot be put back ends the run (3).
gp_units_restore() {
	: >"$GP_STAGE/units.done"
	[ -f "$GP_UNITS" ] || return 0
	GP_UNITS_ID=$(awk -F '\t' '$1 == "id" { print $2; exit }' "$GP_UNITS")
	if [ -n "$GP_OPT_PLAN_ID" ] && [ "$GP_OPT_PLAN_ID" != "$GP_UNITS_ID" ]; then
		gp_say "not restoring the units: plan $GP_OPT_PLAN_ID was replaced by plan $GP_UNITS_ID on this node"
		return 0
	fi
	command -v systemctl >/dev/null 2>&1 ||
		gp_units_fail "systemctl is not available on this node: cannot put back the units recorded in $GP_UNITS"
	awk -F '\t' '$1 == "unit" { print $2 "\t" $3 "\t" $4 }' "$GP_UNITS" >"$GP_STAGE/units.old"
	while IFS="$GP_TAB" read -r gp_ur_u gp_ur_was gp_ur_act; do
		gp_unit_put_back "$gp_ur_u" "$gp_ur_was" "$gp_ur_act" ||
			gp_units_fail "cannot put $gp_ur_u back as it was before gpuplane masked it ($gp_ur_was): $GP_UNIT_ERR"
		gp_units_forget "$gp_ur_u" || gp_units_fail "cannot update $GP_UNITS"
		GP_CHANGED=true
		gp_unit_result "$gp_ur_u" "$gp_ur_was" "$gp_ur_act" "$GP_UNIT_DID"
	done <"$GP_STAGE/units.old"
}

# gp_units_fail MESSAGE: restore could not put a unit back; its record (and the agent that
# reads it) stays, and a person has to look.
gp_units_fail() {
	gp_say "$1"
	gp_json_result false "$1; the record stays in $GP_UNITS and \`sh $GP_STATE/agent.sh restore\` tries again" false
	exit 3
}

gp_units_json() { # the result's "units" member (nothing when no unit was looked at)
	[ -s "$GP_STAGE/units.done" ] || return 0
	printf ', "units": [%s]' "$(awk '{ printf "%s%s", sep, $0; sep = ", " }' "$GP_STAGE/units.done")"
}

# gp_units_status: status's "units" member: each unit gpuplane masked, its state as found
# and now (nothing when none is recorded).
gp_units_status() {
	[ -f "$GP_UNITS" ] || return 0
	gp_ust_sep=
	printf ', "units": {'
	awk -F '\t' '$1 == "unit" { print $2 "\t" $3 "\t" $4 }' "$GP_UNITS" |
		while IFS="$GP_TAB" read -r gp_ust_u gp_ust_was gp_ust_act; do
			printf '%s%s: {"before": %s, "active_before": %s, "now": %s}' "$gp_ust_sep" \
				"$(gp_js "$gp_ust_u")" "$(gp_js "$gp_ust_was")" "$(gp_js "$gp_ust_act")" \
				"$(gp_js "$(gp_unit_state "$gp_ust_u")")"
			gp_ust_sep=', '
		done
	printf '}'
}
# ---------------------------------------------------------------------------------------
# restore

gp_restore() {
	gp_tools
	if [ ! -d "$GP_STATE" ]; then
		gp_say "nothing to restore: gpuplane has not changed this node's containerd"
		gp_json_result true "" ""
		exit 0
	fi
	gp_lock
	gp_state_reset
	gp_load_state && gp_plan_from_state
	gp_select_restart
	gp_recover
	if [ -z "$S_ID" ] || [ ! -s "$GP_MANIFEST" ]; then
		gp_say "nothing to restore: gpuplane has not changed this node's containerd"
		gp_units_restore
		gp_clean_state
		gp_json_result true "" ""
		exit 0
	fi
	if [ -n "$GP_OPT_PLAN_ID" ] && [ "$GP_OPT_PLAN_ID" != "$S_ID" ]; then
		gp_say "not restoring: plan $GP_OPT_PLAN_ID was replaced by plan $S_ID on this node"
		gp_plan_from_state
		gp_json_result true "" ""
		exit 0
	fi
	gp_plan_from_state
	gp_docker_select
	GP_DOCKER_WANT= # Docker's original daemon.json need not list any runtime
	gp_select_containerd

	: >"$GP_STAGE/written"
	gp_before_ok=1
	gp_dump "$P_CONFIG" before || gp_before_ok=0
	: >"$GP_STAGE/touch"
	gp_manifest_files >"$GP_STAGE/managed"
	while IFS= read -r gp_rs_path; do
		[ -n "$gp_rs_path" ] || continue
		[ "$(gp_saved_sha "$gp_rs_path" "$GP_ORIG")" = "$(gp_sha "$GP_ROOT$gp_rs_path")" ] ||
			printf '%s\n' "$gp_rs_path" >>"$GP_STAGE/touch"
	done <"$GP_STAGE/managed"
	GP_CHANGED=false
	gp_need_restart=0
	if [ -s "$GP_STAGE/touch" ]; then
		GP_CHANGED=true
		gp_keep_changed
		gp_step checked
		gp_txn_begin restore "$GP_STAGE/touch" ||
			gp_fail 1 "cannot write the journal under $GP_TXN; nothing was changed"
		gp_step journal
		gp_rs_n=0
		while IFS= read -r gp_rs_path; do
			gp_put_saved "$gp_rs_path" "$GP_ORIG" || gp_fail 1 "cannot put back $gp_rs_path"
			GP_NODE_TOUCHED=1
			printf '%s\n' "$gp_rs_path" >>"$GP_STAGE/written"
			gp_rs_n=$((gp_rs_n + 1))
			gp_step "write-$gp_rs_n"
		done <"$GP_STAGE/touch"
		awk -F '\t' '$1 == "dir" { print $2 }' "$GP_MANIFEST" >"$GP_STAGE/dirs"
		gp_rmdirs "$GP_STAGE/dirs"
		gp_sync
		gp_step rmdirs
		gp_need_restart=1
	fi

	gp_settle gp_check_restored gp_restore_record gp_restore_done
}

# gp_restore_record: what restore leaves must not keep nvidia as the default runtime, and
# the state is forgotten inside the transaction: killed before the commit, the journal
# puts both the files and the state back; after it, what is left is leftovers.
gp_restore_record() {
	[ -n "${GP_FINAL:-}" ] || { gp_dump "$P_CONFIG" final && GP_FINAL=final; }
	# FM09: the default runtime must not stay nvidia unless the node had it so before.
	if [ -n "${GP_FINAL:-}" ] && [ -n "$P_NVIDIA" ] &&
		[ "$(gp_default_of "$GP_FINAL")" = "$P_NVIDIA" ] &&
		[ "$S_ORIGINAL_DEFAULT" != "$P_NVIDIA" ]; then
		gp_txn_commit # the originals stand; gpuplane's state stays for the next restore
		gp_setters=$(gp_setters "$P_NVIDIA")
		gp_fail 1 "gpuplane's files are restored, but '$P_NVIDIA' is still containerd's default runtime, set by a file gpuplane does not manage (${gp_setters:-not found}) (FM09): remove that file (e.g. uninstall the GPU Operator's toolkit) and run 'sh /var/lib/gpuplane/agent.sh restore' again"
	fi
	rm -f "$GP_STATEFILE"
	gp_step forget
}

gp_restore_done() {
	gp_units_restore
	gp_clean_state
	gp_say "restored the original containerd files"
}

# gp_keep_changed: FM05 on restore. A managed file another writer changed since gpuplane
# wrote it is put back to its original all the same (restore is an uninstall), but a
# copy of that writer's version is kept first, outside the state restore forgets, and
# the run says where.
gp_keep_changed() {
	: >"$GP_STAGE/kept"
	gp_kc_stamp=$(date -u +%Y%m%dT%H%M%SZ 2>/dev/null || echo kept)
	while IFS= read -r gp_kc_path; do
		gp_kc_wrote=$(gp_manifest_sha "$gp_kc_path")
		case $gp_kc_wrote in '' | -) continue ;; esac
		[ -f "$GP_ROOT$gp_kc_path" ] || continue
		gp_kc_now=$(gp_sha "$GP_ROOT$gp_kc_path")
		[ "$gp_kc_now" = "$gp_kc_wrote" ] && continue
		gp_data_equal "$gp_kc_path" "$(gp_wrote_copy "$gp_kc_path")" && continue
		gp_kc_copy=$GP_STATE/kept/$gp_kc_stamp$gp_kc_path
		if ! mkdir -p "$(dirname "$gp_kc_copy")" || ! cp -p "$GP_ROOT$gp_kc_path" "$gp_kc_copy" ||
			! gp_fsync "$gp_kc_copy"; then
			rm -f "$gp_kc_copy"
			gp_fail 1 "cannot keep a copy of $gp_kc_path, which another writer changed since gpuplane wrote it (FM05), under $GP_STATE/kept; nothing was changed"
		fi
		gp_say "$gp_kc_path was changed by another writer since gpuplane wrote it (FM05; node: $(gp_word "$gp_kc_now"), gpuplane wrote: $(gp_word "$gp_kc_wrote")): its original is put back, and that writer's version is kept at $gp_kc_copy"
		printf '%s\n' "$gp_kc_copy" >>"$GP_STAGE/kept"
	done <"$GP_STAGE/touch"
}

gp_check_restored() {
	gp_cr_save=$P_RUNTIMES
	P_RUNTIMES=
	gp_check "$1" ""
	gp_cr_rc=$?
	P_RUNTIMES=$gp_cr_save
	return $gp_cr_rc
}

# gp_clean_state: forget everything but the units record. The state file goes first:
# without it the rest is leftovers that the next run removes (gp_recover), whatever point
# this stops at.
gp_clean_state() {
	rm -f "$GP_STATEFILE"
	rm -rf "$GP_STATE/backup" "$GP_MANIFEST" "$GP_BASES" \
		"$GP_STATE/wrote" "$GP_STATE"/.*.back "$GP_STATE"/*.tmp.*
	# masked units still recorded: restore (the installed agent) puts them back later
	[ -f "$GP_UNITS" ] || rm -f "$GP_STATE/agent.sh"
}

# ---------------------------------------------------------------------------------------
# status

gp_status() {
	gp_state_reset
	gp_have_state=0
	if gp_load_state; then
		gp_have_state=1
		[ "$GP_HAVE_PLAN" = 1 ] || gp_plan_from_state
	fi
	if [ "$GP_HAVE_PLAN" != 1 ] && [ "$gp_have_state" != 1 ]; then
		printf '{"mode": "status", "ok": false, "applied": false, "interrupted": %s, "error": "gpuplane has not applied a plan here"}\n' \
			"$([ -d "$GP_TXN" ] && echo true || echo false)"
		exit 2
	fi
	gp_find_containerd || GP_CONTAINERD=
	: >"$GP_STAGE/drifted"
	if [ "$gp_have_state" = 1 ] && [ -f "$GP_MANIFEST" ]; then
		awk -F '\t' '$1 == "file" { print $2 "\t" $3 }' "$GP_MANIFEST" |
			while IFS="$GP_TAB" read -r gp_st_path gp_st_sha; do
				[ "$(gp_sha "$GP_ROOT$gp_st_path")" = "$gp_st_sha" ] && continue
				gp_data_equal "$gp_st_path" "$(gp_wrote_copy "$gp_st_path")" && continue
				printf '%s\n' "$gp_st_path" >>"$GP_STAGE/drifted"
			done
	fi
	{
		printf '{"mode": "status", "applied": %s, "interrupted": %s, "plan_id": %s' \
			"$([ "$gp_have_state" = 1 ] && echo true || echo false)" \
			"$([ -d "$GP_TXN" ] && echo true || echo false)" "$(gp_js "$P_ID")"
		printf ', "distro": %s, "config": %s' "$(gp_js "$P_DISTRO")" "$(gp_js "$P_CONFIG")"
		printf ', "bases": {%s}' "$(gp_bases_json)"
		gp_units_status
		if [ -n "$GP_CONTAINERD" ] && gp_dump "$P_CONFIG" now; then
			gp_st_sha=$(cat "$GP_STAGE/now.sha")
			gp_st_drift=false
			[ "$gp_have_state" = 1 ] && [ "$gp_st_sha" != "$S_CONFIG_SHA" ] && gp_st_drift=true
			[ -s "$GP_STAGE/drifted" ] && gp_st_drift=true
			printf ', "ok": true, %s, "config_sha256": %s' "$(gp_runtimes_json now)" "$(gp_js "$gp_st_sha")"
			printf ', "applied_config_sha256": %s, "drift": %s' "$(gp_js "$S_CONFIG_SHA")" "$gp_st_drift"
			printf ', "drifted_files": [%s]}\n' "$(gp_json_list "$GP_STAGE/drifted")"
			gp_st_rc=0
		else
			printf ', "ok": false, "error": %s}\n' "$(gp_js "containerd cannot load $P_CONFIG: ${GP_DUMP_ERR:-no containerd binary}")"
			gp_st_rc=1
		fi
	}
	exit $gp_st_rc
}

# ---------------------------------------------------------------------------------------
# Entry point: run the mode (unless a program embeds the agent and runs it itself)

gp_main() {
	gp_begin "$@"
	gp_end
}

if [ "${GP_EMBEDDED:-0}" != 1 ]; then
	GP_SELF_PATH=$0
	gp_self() { cat -- "$GP_SELF_PATH"; }
	gp_main "$@"
fi
