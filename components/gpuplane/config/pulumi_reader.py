"""Reading a stack's config: `parse_stack_config` for `{key: value}` (a stack file read
offline, tests) and `config_from_pulumi` inside a running Pulumi program. Both end in
`parse_stack_config`, so an invalid value gets the same error either way.

It gathers every problem of the stack before raising: unknown keys, each value that
fails its own validation, and every combination that cannot work, including those
among the keys that did validate while others did not (`stack.problems_beside`).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError

from gpuplane.config.errors import NAMESPACE, Problem, StackConfigError, field_problem
from gpuplane.config.stack import KEYS, SECRET_KEYS, StackConfig, problems_beside


def parse_stack_config(values: Mapping[str, Any]) -> StackConfig:
    """Validate `{key: value}` (keys without the `gpuplane:` prefix) into a StackConfig;
    StackConfigError with all of the stack's problems, each naming its key."""
    unknown = sorted(set(values) - set(KEYS))
    problems = [Problem(f"{NAMESPACE}:{k}", unknown_key(k, KEYS)) for k in unknown]
    known = {k: v for k, v in values.items() if k in KEYS}
    try:
        config = StackConfig.model_validate(known)
    except ValidationError as exc:
        errors = exc.errors()
        problems += [_with_known_keys(field_problem(err), err) for err in errors]
        if all(err["loc"] for err in errors):
            problems += problems_beside(known, {str(err["loc"][0]) for err in errors})
        raise StackConfigError(problems) from None
    except StackConfigError as exc:   # the combination checks (StackConfig._consistent)
        raise StackConfigError(problems + exc.problems) from None
    if problems:
        raise StackConfigError(problems)
    return config


def unknown_key(key: str, known: Sequence[str]) -> str:
    """`unknown key`, the closest known key where one is close (a typo), and the keys that
    are known at that level."""
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    guess = f" (did you mean `{close[0]}`?)" if close else ""
    return f"unknown key{guess}; known keys here: {', '.join(known)}"


def _with_known_keys(problem: Problem, err: Any) -> Problem:
    """A nested unknown key (`gpuplane:cluster.distor`) with its section's known keys and
    the closest of them, as the top level gets."""
    if err["type"] != "extra_forbidden":
        return problem
    loc = [p for p in err["loc"] if p != "[key]"]
    known = _keys_of_section(loc[:-1])
    if known is None:
        return problem
    return Problem(problem.key, unknown_key(str(loc[-1]), known))


def _keys_of_section(path: Sequence[Any]) -> list[str] | None:
    """The keys users may write in the section at `path` (aliases, as in the stack file);
    None where the path does not lead to a section."""
    model: type[BaseModel] = StackConfig
    skip = False
    for part in path:
        if skip or isinstance(part, int):
            skip = False
            continue
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part),
                     None)
        inner = _model_in(field.annotation) if field is not None else None
        if field is None or inner is None:
            return None
        skip = _is_mapping(field.annotation)
        model = inner
    return [f.alias or n for n, f in model.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _is_mapping(annotation: Any) -> bool:
    if get_origin(annotation) in (dict, Mapping):
        return True
    return any(_is_mapping(arg) for arg in get_args(annotation))


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

