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

