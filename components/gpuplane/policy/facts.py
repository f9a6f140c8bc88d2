"""One set of cluster facts for the whole pack.

Pulumi gives each policy only its own config (`args.get_config()`), and an `all` entry
sets an enforcement level, never properties. The facts a stack without gpuplane's intent
is judged by (`distro`, `containerdVersion`, ...: `gpuplane.policy.pack.CONFIG_SCHEMA`)
must therefore sit under every policy, 34 copies of the same values that drift apart
when edited by hand. `gpuplane policy-pack config` writes them from one set: this module
checks the facts against the pack's own schema and spreads them onto every policy,
keeping the levels of a config it extends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuplane.distros.profiles import Distro
from gpuplane.platforms.profiles import Platform
from gpuplane.policy.config import PackConfigError

_VERSION = r"^[0-9]+\.[0-9]+(\.[0-9]+)?$"

FACTS_SCHEMA: dict[str, dict[str, Any]] = {
    "distro": {"type": "string", "enum": [d.value for d in Distro],
               "description": "the nodes' distribution, as gpuplane:cluster.distro"},
    "containerdVersion": {"type": "string", "pattern": _VERSION,
                          "description": "the nodes' containerd, as "
                          "gpuplane:cluster.containerdVersion (e.g. \"1.7\")"},
    "containerdBaseDir": {"type": "string", "pattern": "^/",
                          "description": "k8s-snap only: the containerd base dir k8sd was "
                          "bootstrapped with, as gpuplane:cluster.containerdBaseDir (\"/\": "
                          "the default layout)"},
    "platform": {"type": "string", "enum": [p.value for p in Platform],
                 "description": "the managed platform, as gpuplane:cluster.platform; "
                 "unset: self-managed"},
    "driver": {"type": "string", "enum": ["preinstalled", "managed"],
               "description": "as gpuplane:gpuOperator.driver: the nodes ship the driver, or "
                              "the operator installs it"},
    "nvidiaDefault": {"type": "boolean", "default": False,
                      "description": "workload stacks: nvidia is containerd's default runtime"},
    "runtimeClass": {"type": "string", "default": "nvidia",
                     "description": "workload stacks: the nvidia RuntimeClass name"},
    "devicePlugin": {"type": "string", "enum": ["gpu-operator", "hami"],
                     "default": "gpu-operator",
                     "description": "whose device plugin serves nvidia.com/gpu"},
    "cdi": {"type": "boolean", "default": False,
            "description": "as gpuplane:gpuOperator.cdi: the operator's CDI is on"},
    "nri": {"type": "boolean", "default": False,
            "description": "as gpuplane:gpuOperator.nri: the operator's NRI plugin runs "
                           "(cdi.nriPluginEnabled), its RuntimeClasses are deleted"},
    "kubernetesVersion": {"type": "string", "pattern": _VERSION,
                          "description": "the cluster's Kubernetes, as "
                          "gpuplane:cluster.kubernetesVersion (e.g. \"1.31.0\")"},
    "maxGpusPerNode": {"type": "integer", "minimum": 0, "default": 0,
                       "description": "workload stacks: GPUs per node (0: unknown)"},
}
"""The facts' JSON Schema properties, named like the stack keys: every policy's config
schema (`gpuplane.policy.pack.CONFIG_SCHEMA`) and `policy-pack config`'s flags."""


def facts_problems(facts: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Every problem of `facts` against the pack's config schema, one per key."""
    from jsonschema import Draft7Validator  # only when facts are checked: the CLI starts fast

    validator = Draft7Validator({"type": "object", "properties": dict(schema),
                                 "additionalProperties": False})
    problems = []
    for error in sorted(validator.iter_errors(dict(facts)), key=lambda e: list(e.path)):
        key = ".".join(str(p) for p in error.path)
        message = (f"{error.instance!r} is not a version such as \"1.7\" or \"1.31.0\""
                   if error.validator == "pattern" else error.message)
        problems.append(f"{key}: {message}" if key else message)
    return problems + _release_problems(facts, {p.split(":")[0] for p in problems})


def _release_problems(facts: Mapping[str, Any], reported: set[str]) -> list[str]:
    """The release line the plan accepts, by the plan's own check: the schema's pattern
    takes `1.10`, which no containerd is (and unquoted YAML makes of 1.10 what 1.1 is)."""
    from gpuplane.containerd.versions import ContainerdVersion

    version = facts.get("containerdVersion")
    if not isinstance(version, str) or "containerdVersion" in reported:
        return []
    try:
        ContainerdVersion.parse(version)
    except ValueError as exc:
        return [f"containerdVersion: {exc}"]
    return []


def spread_facts(facts: Mapping[str, Any], policies: Iterable[str],
                 schema: Mapping[str, Any],
                 base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A policy config with `facts` under every policy of `policies`.

    `base` (a loaded config) keeps its entries: a policy's level and its other
    properties stay, the facts replace the same keys; a `disabled` policy stays disabled
    and gets no facts (it never runs). PackConfigError lists every problem of `facts`."""
    problems = facts_problems(facts, schema)
    if problems:
        raise PackConfigError("\n".join(problems))
    out: dict[str, Any] = dict(base or {})
    for name in policies:
        entry = out.get(name)
        if entry == "disabled" or (isinstance(entry, Mapping)
                                   and entry.get("enforcementLevel") == "disabled"):
            continue
        if isinstance(entry, str):
            entry = {"enforcementLevel": entry}
        out[name] = {**(entry or {}), **facts}
    return out


__all__ = ["FACTS_SCHEMA", "facts_problems", "spread_facts"]
