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
