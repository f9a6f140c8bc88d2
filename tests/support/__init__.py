"""The tests' harnesses: real containerd and toolkit oracles, the control plane, the
real Pulumi engine, nodes in namespaces, recorded clusters, the stack catalogue.
Imported as `from support import oracle`; nothing in the product imports them."""
