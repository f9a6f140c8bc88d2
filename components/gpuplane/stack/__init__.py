"""Pulumi components: the only modules that create resources. Everything they set comes
from pure functions (config, planner, values, rollout) that are tested on their own."""

from __future__ import annotations

import pulumi


def child_options(parent: pulumi.Resource,
                  opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """Options for a component's children. A component's `depends_on` does not hold back
    its children by itself, so each child repeats it: a Helm release must really wait
    for the node rollout."""
    return pulumi.ResourceOptions(parent=parent, depends_on=opts.depends_on if opts else None)
