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
