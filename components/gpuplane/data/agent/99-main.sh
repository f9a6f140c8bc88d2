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
