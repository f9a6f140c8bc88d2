"""`gpuplane nodes capture`: read the files gpuplane plans from off every node of a stack,
keep one content-addressed copy of each, and point the stack's `baselineFiles` at them, so
that the first `pulumi up` plans from what the nodes really have."""
