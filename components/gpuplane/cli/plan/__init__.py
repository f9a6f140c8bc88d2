"""The offline plan: a stack's program run under Pulumi's mock engine, reported per node."""
