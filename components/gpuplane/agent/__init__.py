"""The node agent: the sh program it ships (script, parts), the pod that runs it
without SSH, and the check of one node's files."""
