"""The gpuplane CrossGuard pack. Constructing PolicyPack starts the analyzer server and
never returns, so this file does nothing else; the policies live in gpuplane.policy."""

from pulumi_policy import Policy, PolicyPack

from gpuplane.policy.pack import PACK_NAME, build_policies

policies: list[Policy] = [*build_policies()]
PolicyPack(name=PACK_NAME, policies=policies)
