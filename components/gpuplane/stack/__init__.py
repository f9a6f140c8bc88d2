"""Pulumi components: the only modules that create resources. Everything they set comes
from pure functions (config, planner, values, rollout) that are tested on their own.

One way to build a component (as pulumi-eks and the Pulumi examples do): an `...Args`
class, every refusal before the first child (`gpuplane.stack.refusal`), children built
with `child_options` (parent, and the caller's `depends_on` passed on), every output a
declared attribute, and `register_outputs` at the end.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi


def child_options(parent: pulumi.Resource, opts: pulumi.ResourceOptions | None, *,
                  depends_on: Sequence[pulumi.Input[pulumi.Resource]] = ()
                  ) -> pulumi.ResourceOptions:
    """Options for a component's children: `parent`, the caller's `depends_on` (a
    component's `depends_on` does not hold back its children by itself, and a Helm
    release must really wait for the node rollout), plus `depends_on`."""
    inherited = opts.depends_on if opts else None
    if not depends_on:
        return pulumi.ResourceOptions(parent=parent, depends_on=inherited)
    if isinstance(inherited, pulumi.Resource):
        inherited = [inherited]
    if inherited is None or isinstance(inherited, list):
        # Plain lists, without `ResourceOptions.merge`'s copies: a fleet's rollout builds
        # two of these per node.
        return pulumi.ResourceOptions(parent=parent,
                                      depends_on=[*(inherited or []), *depends_on])
    return pulumi.ResourceOptions(parent=parent, depends_on=inherited).merge(
        pulumi.ResourceOptions(depends_on=list(depends_on)))
