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

