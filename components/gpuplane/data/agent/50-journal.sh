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

