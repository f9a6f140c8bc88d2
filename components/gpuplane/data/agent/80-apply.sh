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

