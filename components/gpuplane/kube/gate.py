"""Fail `pulumi up` cleanly on a failure a dynamic resource reports.

A dynamic provider that raises has its exception printed under the SDK's traceback
(`pulumi.dynamic.__main__._abort_with_traceback`, pulumi 3.260.0). gpuplane's dynamic
resources (the post-deploy checks, the node agent's pods) therefore end their create and
update normally and report a failure in an output; :func:`judged` logs it as an error on
the resource, where the CLI shows it, and :func:`gate` stops the program with
`pulumi.RunError`, which the language host reports as its message alone. What depends on
the gate is never registered: the next rollout batch, the operator, the sharing checks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pulumi


def judged(resource: pulumi.Resource, output: pulumi.Output[Any],
           failure: Callable[[Any], str | None]) -> pulumi.Output[bool]:
    """Whether `resource` succeeded: `failure(value of output)` is None. A failure's text
    is logged as an error on `resource`. Unknown in preview."""

    def judge(value: Any) -> bool:
        message = failure(value)
        if message is not None:
            pulumi.log.error(message, resource=resource)
            return False
        return True

    return output.apply(judge)


def gate(resources: Sequence[pulumi.Resource], verdicts: Sequence[pulumi.Output[bool]],
         message: Callable[[list[str]], str]) -> pulumi.Output[pulumi.Resource]:
    """One of `resources` once every verdict is in, for `depends_on` of what must wait for
    them (it carries all of them as dependencies, in preview too).

    When any failed it raises `pulumi.RunError(message(names of the failed))`. Waiting for
    every verdict first lets the resources beside the failed one finish and report too."""
    names = [r.pulumi_resource_name for r in resources]

    def judge(passed: list[bool]) -> pulumi.Resource:
        failed = [name for name, ok in zip(names, passed, strict=True) if not ok]
        if failed:
            raise pulumi.RunError(message(failed))
        return resources[0]

    return pulumi.Output.all(*verdicts).apply(judge)


__all__ = ["gate", "judged"]
