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
#include jstr.awk
'

# The effective CRI runtimes from a `containerd config dump` (1.x: version 2 dump,
# "io.containerd.grpc.v1.cri"; 2.x: version 3, "io.containerd.cri.v1.runtime").
# Prints: "default<TAB>name", "cdi<TAB>bool" and one
# "runtime<TAB>name<TAB>runtime_type<TAB>BinaryName<TAB>SystemdCgroup" per runtime.
# shellcheck disable=SC2016 # an awk program: its $ fields are awk's, not the shell's
GP_AWK_FACTS='
#include facts.awk
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

