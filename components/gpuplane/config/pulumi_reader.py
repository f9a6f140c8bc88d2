"""Reading a stack's config: `parse_stack_config` for `{key: value}` (a stack file read
offline, tests) and `config_from_pulumi` inside a running Pulumi program. Both end in
`parse_stack_config`, so an invalid value gets the same error either way.

It gathers every problem of the stack before raising: unknown keys, each value that
fails its own validation, and every combination that cannot work, including those
among the keys that did validate while others did not (`stack.problems_beside`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from gpuplane.config.errors import NAMESPACE, Problem, StackConfigError, field_problem
from gpuplane.config.stack import KEYS, SECRET_KEYS, StackConfig, problems_beside


def parse_stack_config(values: Mapping[str, Any]) -> StackConfig:
    """Validate `{key: value}` (keys without the `gpuplane:` prefix) into a StackConfig;
    StackConfigError with all of the stack's problems, each naming its key."""
    unknown = sorted(set(values) - set(KEYS))
    problems = [Problem(f"{NAMESPACE}:{k}", f"unknown key; known keys: {', '.join(KEYS)}")
                for k in unknown]
    known = {k: v for k, v in values.items() if k in KEYS}
    try:
        config = StackConfig.model_validate(known)
    except ValidationError as exc:
        errors = exc.errors()
        problems += [field_problem(err) for err in errors]
        if all(err["loc"] for err in errors):
            problems += problems_beside(known, {str(err["loc"][0]) for err in errors})
        raise StackConfigError(problems) from None
    except StackConfigError as exc:   # the combination checks (StackConfig._consistent)
        raise StackConfigError(problems + exc.problems) from None
    if problems:
        raise StackConfigError(problems)
    return config


def config_from_pulumi() -> StackConfig:
    """The stack config of the running Pulumi program; the SSH key stays a Pulumi secret
    (see `ssh_private_key_output`), the model only learns whether one is set."""
    import pulumi

    cfg = pulumi.Config(NAMESPACE)
    values: dict[str, Any] = {}
    for key in KEYS:
        if key in SECRET_KEYS:
            if cfg.get(key) is not None:
                values[key] = "<secret>"
            continue
        raw = cfg.get(key)
        if raw is None:
            continue
        values[key] = cfg.get_object(key) if raw[:1] in "[{" else raw
    from pulumi.runtime import config as runtime_config

    for full in {*runtime_config.CONFIG.get(), *runtime_config.get_config_env()}:
        ns, _, key = full.partition(":")
        if ns == NAMESPACE and key not in KEYS:
            values[key] = None
    return parse_stack_config(values)

