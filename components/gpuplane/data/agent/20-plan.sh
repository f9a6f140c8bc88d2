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

