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

