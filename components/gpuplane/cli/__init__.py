"""The `gpuplane` command: one module per command, and the offline plan (`cli.plan`)."""
