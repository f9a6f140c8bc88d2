"""The NVIDIA container toolkit as the GPU Operator runs it: the env the operator hands the
installer, and (with the toolkit oracle) what the installer writes. Pure: it sits below the
planner and the rulebook, which both use it."""
