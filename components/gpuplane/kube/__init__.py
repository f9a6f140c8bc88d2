"""Talking to a cluster: credentials, the client protocol, the dynamic-provider base and
the gate that fails `pulumi up` on a failure a dynamic resource reports."""
