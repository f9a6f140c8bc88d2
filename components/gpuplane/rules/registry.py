"""Rules findable by id: for each failure mode (FM01 onwards), the functions that can emit it,
its catalogue entry, the event texts that point at it and the tests that hold it.

A rule id is raised from many places (FM03 from the containerd model, the toolkit's
version checks, the policies; FM11 from the operator values, the platforms, workloads,
the post-deploy checks and the doctor), so "where is FM11 decided, and what proves it?"
had no answer but a grep. This module is that answer as data:

    >>> from gpuplane.rules.registry import REGISTRY
    >>> REGISTRY["FM11"].checks[:2]
    ('gpuplane.rules.operator._runtime_class', 'gpuplane.rules.platform._runtime_class')

The data is checked, not trusted (tests/pure/test_rules_registry.py): every id of the
catalogue has an entry with at least one check and one test; every named check resolves
to a function whose source mentions the id; every named test exists and mentions the id;
and every `Finding("FMxx", ...)` in components/ (and every function that picks an id for
one) is listed here under that id, so adding a new place that emits a rule fails the
tests until it is listed. Pure: names are strings, nothing is imported until `resolve`.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuplane.rules.catalogue import RULES, Rule
from gpuplane.rules.dra_catalogue import DRA_REGISTRY
from gpuplane.rules.events import EventCause, causes_of
from gpuplane.rules.sharing_registry import SHARING_REGISTRY


@dataclass(frozen=True)
class RuleIndex:
    """Where one rule lives. `checks`: dotted names of the functions that emit the id
    (rules layer first, then policies, post-deploy checks, doctor); `tests`: pytest node
    ids (`tests/<file>.py::<test>`) that hold the rule."""

    id: str
    checks: tuple[str, ...]
    tests: tuple[str, ...]

    @property
    def rule(self) -> Rule:
        """The catalogue entry (title, symptom, why, example, fix, upstream)."""
        return RULES[self.id]

    @property
    def events(self) -> tuple[EventCause, ...]:
        """The rows of the event table (`gpuplane.rules.events`) that point at the rule."""
        return causes_of(self.id)

    def modules(self) -> tuple[str, ...]:
        """The modules the rule is emitted from, in the order of `checks`."""
        return tuple(dict.fromkeys(module_of(name) for name in self.checks))


def module_of(dotted: str) -> str:
    """`gpuplane.rules.containerd.facts.Analysis.rule_of` -> its module
    `gpuplane.rules.containerd.facts` (the part before the first capitalised name or the
    last name)."""
    parts = dotted.split(".")
    for i, part in enumerate(parts[1:], start=1):
        if part[:1].isupper():
            return ".".join(parts[:i])
    return ".".join(parts[:-1])


def resolve(dotted: str) -> Callable[..., Any]:
    """The function a dotted name of `checks` names (imports its module)."""
    found = pkgutil.resolve_name(dotted)
    if not callable(found):
        raise TypeError(f"{dotted} is not a function")
    return found  # type: ignore[no-any-return]


def _entry(checks: tuple[str, ...], tests: tuple[str, ...]) -> tuple[tuple[str, ...],
                                                                    tuple[str, ...]]:
    return checks, tests


_DATA = {
    "FM01": _entry(
        checks=(
            "gpuplane.rules.containerd.facts.Analysis.default_owner",
            "gpuplane.rules.containerd.reading._missing_imports",
            "gpuplane.rules.containerd.reading._missing_planned",
            "gpuplane.rules.containerd.reading.fm01",
            "gpuplane.rules.containerd.runtimes.fm01_shadowed_binary",
            "gpuplane.rules.containerd.whole.missing_binary",
            "gpuplane.rules.containerd.whole.no_top_level_file",
            "gpuplane.rules.toolkit._nvidia_default",
            "gpuplane.rules.toolkit._toolkit_switch",
            "gpuplane.checks.causes._event_rule",
            "gpuplane.checks.causes.device_plugin_id",
            "gpuplane.checks.causes.gpu_path_id",
            "gpuplane.checks.verdicts.probe_findings",
            "gpuplane.doctor.nodes._probe_symptoms",
            "gpuplane.doctor.symptoms.classify",
        ),
        tests=(
            "tests/pure/test_rules_cluster.py::test_fm01_operator_toolkit_disabled_while_stack_relies_on_it",
            "tests/pure/test_checks_verdicts.py::test_real_no_driver_output_is_fm01_with_runtime_class",
            "tests/real/test_doctor_inspect.py::test_toolkit_drop_in_that_nothing_imports_is_fm01",
            "tests/pure/test_rules_cluster.py::test_fm01_fm09_nvidia_default_not_wanted_but_toolkit_default_sets_it",
            "tests/real/test_whole_config.py::test_fm01_missing_binary_name_is_a_finding",
            "tests/real/test_whole_config.py::test_fm01_unread_dropin_with_the_only_nvidia_runtime_is_an_error",
            "tests/real/test_whole_config.py::test_fm01_no_top_level_file_is_judged_as_the_defaults",
            "tests/pure/test_rules_all_at_once.py::test_fm01_detected_mode_still_reports_an_invalid_set_as_default",
        ),
    ),
    "FM02": _entry(
        checks=(
            "gpuplane.rules.containerd.facts.Analysis.default_owner",
            "gpuplane.rules.containerd.facts.Analysis.rule_of",
            "gpuplane.rules.containerd.merging._fm02_runtimes",
            "gpuplane.rules.containerd.merging._fm02_settings",
            "gpuplane.checks.causes._event_rule",
        ),
        tests=(
            "tests/pure/test_rules_containerd.py::test_never_fm02_on_2_1",
            "tests/gpu/test_gpu_chain.py::test_rehearsal_the_fm02_layout_fails_as_the_rule_predicts",
            "tests/pure/test_rules_containerd.py::test_fm02_every_cri_setting_a_later_table_drops_is_reported",
            "tests/pure/test_rules_containerd.py::test_fm02_incident_drop_ins_lose_runc_before_2_1",
        ),
    ),
    "FM03": _entry(
        checks=(
            "gpuplane.rules.containerd.facts.Analysis.rule_of",
            "gpuplane.rules.containerd.merging._newer_than_root",
            "gpuplane.rules.containerd.merging.fm03",
            "gpuplane.rules.containerd.runtimes.unexplained_refusals",
            "gpuplane.rules.containerd.whole.cri_disabled",
            "gpuplane.rules.toolkit_source.check_toolkit_run",
            "gpuplane.rules.toolkit_source.check_toolkit_source_version",
            "gpuplane.rules.toolkit_version.check_toolkit_containerd",
            "gpuplane.rules.toolkit_dump.check_toolkit_dump",
            "gpuplane.policy.nodes.unreadable",
        ),
        tests=(
            "tests/pure/test_rules_chart_facts.py::test_fm03_diagnosed_only_charts_are_known_to_the_rules_but_not_deployable",
            "tests/pure/test_rules_containerd.py::test_fm03_a_doubly_named_v1_plugin_is_unpredictable_on_2x",
            "tests/pure/test_rules_containerd.py::test_fm03_runtime_without_runtime_type",
            "tests/pure/test_rules_toolkit_dump.py::test_fm03_dump_only_toolkit_where_containerd_is_off_path",
            "tests/pure/test_rules_containerd.py::test_fm03_v1_drop_in_in_a_v2_config_is_refused_on_1_x",
            "tests/real/test_whole_config.py::test_fm03_disabled_cri_plugin_is_an_error",
            "tests/real/test_whole_config.py::test_fm03_v3_dropin_over_v2_root_loses_mirrors_sandbox_and_cni_now",
        ),
    ),
    "FM04": _entry(
        checks=(
            "gpuplane.rules.nodefiles.check_frozen_template",
            "gpuplane.rules.nodefiles.check_node_files",
            "gpuplane.rules.platform.check_platform_node_writes",
            "gpuplane.rules.toolkit._detected_config",
        ),
        tests=(
            "tests/pure/test_rules_cluster.py::test_incident_4_rke2_toolkit_pointed_at_generated_config_is_fm04",
            "tests/real/test_rules_cluster_workloads.py::test_fm04_generated_config_on_rancher",
            "tests/real/test_rules_cluster_workloads.py::test_fm04_microk8s_and_drop_in_distros",
            "tests/real/test_rules_cluster_workloads.py::test_fm04_wrong_template_for_the_containerd_line",
        ),
    ),
    "FM05": _entry(
        checks=(
            "gpuplane.rules.toolkit._toolkit_switch",
            "gpuplane.rules.toolkit_losses.check_distro_unmanaged",
            "gpuplane.rules.toolkit_losses.check_toolkit_losses",
        ),
        tests=(
            "tests/pure/test_rules_cluster.py::test_fm05_operator_toolkit_beside_host_toolkit",
            "tests/pure/test_policies.py::test_every_failure_mode_but_fm05_has_a_mandatory_and_an_advisory_policy",
            "tests/real/test_rules_toolkit_losses.py::test_fm05_a_stack_planned_from_captured_drop_ins_reports_the_loss",
            "tests/real/test_rules_toolkit_losses.py::test_fm05_containerd_2_keeps_them_and_the_plan_says_nothing",
        ),
    ),
    "FM06": _entry(
        checks=(
            "gpuplane.rules.rollout._all_at_once",
            "gpuplane.rules.rollout._batch_size",
            "gpuplane.rules.rollout._canary",
            "gpuplane.rules.rollout._ordering",
        ),
        tests=(
            "tests/real/test_rules_cluster_workloads.py::test_fm06_batch_larger_than_max_unavailable",
            "tests/real/test_rules_cluster_workloads.py::test_fm06_batch_not_waiting_for_the_previous_one",
            "tests/real/test_rules_cluster_workloads.py::test_fm06_canary",
            "tests/pure/test_policies.py::test_rollout_without_batches_violates_fm06",
        ),
    ),
    "FM07": _entry(
        checks=(
            "gpuplane.rules.containerd.runtimes.fm07",
        ),
        tests=(
            "tests/pure/test_rules_containerd.py::test_fm07_systemd_cgroup_against_the_kubelet",
            "tests/pure/test_rules_containerd.py::test_fm07_systemd_cgroup_disagreement_between_runtimes",
            "tests/pure/test_rules_containerd.py::test_fm07_systemd_cgroup_read_with_containerds_own_key_matching",
            "tests/pure/test_baselines.py::test_fm07_the_models_findings_do_not_block_nodes_planned_from_their_own_files",
        ),
    ),
    "FM08": _entry(
        checks=(
            "gpuplane.rules.operator._driver",
            "gpuplane.rules.platform._driver",
            "gpuplane.rules.platform._toolkit",
            "gpuplane.checks.allocatable.allocatable_findings",
            "gpuplane.checks.verdicts.probe_findings",
            "gpuplane.checks.verdicts.vectoradd_findings",
            "gpuplane.checks.dra.resourceslice_findings",
        ),
        tests=(
            "tests/pure/test_multi_cluster.py::test_fm08_is_judged_by_each_clusters_own_intent",
            "tests/pure/test_rules_cluster.py::test_fm08_driver_default_enabled_while_preinstalled",
            "tests/pure/test_rules_cluster.py::test_fm08_managed_driver_disabled",
            "tests/pure/test_checks_verdicts.py::test_fm08_allocatable_wrong_physical_count",
            "tests/pure/test_checks_verdicts.py::test_fm08_cuda_failures_name_the_error",
            "tests/pure/test_checks_dra.py::test_fm38_fm08_resourceslice_findings",
        ),
    ),
    "FM09": _entry(
        checks=(
            "gpuplane.rules.containerd.facts.Analysis.default_owner",
            "gpuplane.rules.containerd.runtimes.fm09",
            "gpuplane.rules.rollout._restore",
            "gpuplane.rules.toolkit._nvidia_default",
        ),
        tests=(
            "tests/real/test_rules_cluster_workloads.py::test_fm09_delete_without_restore",
            "tests/pure/test_policies.py::test_delete_that_does_not_restore_violates_fm09",
            "tests/pure/test_rules_chart_facts.py::test_fm09_cdi_makes_nvidia_not_default_only_from_v25_10",
            "tests/pure/test_rules_cluster.py::test_fm01_fm09_nvidia_default_not_wanted_but_toolkit_default_sets_it",
        ),
    ),
    "FM10": _entry(
        checks=(
            "gpuplane.rules.operator._plugin_config",
            "gpuplane.rules.timeslicing._bad",
            "gpuplane.rules.timeslicing.check_time_slicing",
            "gpuplane.checks.allocatable.allocatable_findings",
            "gpuplane.checks.allocatable._pool_finding",
            "gpuplane.checks.allocatable._mig_manager_finding",
            "gpuplane.checks.causes.device_plugin_id",
            "gpuplane.checks.verdicts.timeslicing_findings",
            "gpuplane.checks.verdicts.mig_findings",
            "gpuplane.doctor.analyse._time_slicing",
            "gpuplane.doctor.health.allocatable",
            "gpuplane.doctor.sharing.mig_manager_symptom",
            "gpuplane.doctor.sharing.pool_counts",
        ),
        tests=(
            "tests/pure/test_rules_cluster.py::test_fm10_plugin_config_create_clashes_with_gpuplanes_configmap",
            "tests/pure/test_rules_cluster.py::test_fm10_plugin_config_name_and_default",
            "tests/pure/test_rules_cluster.py::test_fm10_plugin_config_without_stack_time_slicing",
            "tests/real/test_rules_cluster_workloads.py::test_fm10_bad_replicas",
            "tests/pure/test_sharing_postdeploy.py::test_fm10_allocatable_check_names_node_resource_expected_and_got",
            "tests/pure/test_sharing_postdeploy.py::test_fm10_a_node_mig_manager_is_reconfiguring_is_reported_as_that",
            "tests/pure/test_sharing_postdeploy.py::test_fm10_doctor_mig_manager_failed_and_the_paused_wedge",
            "tests/engine/test_device_plugin_node.py::test_fm10_allocatable_check_on_a_real_kubelet_advertising_mig_instances",
        ),
    ),
    "FM11": _entry(
        checks=(
            "gpuplane.rules.operator._runtime_class",
            "gpuplane.rules.platform._runtime_class",
            "gpuplane.rules.workloads._runtime_class",
            "gpuplane.checks.causes._event_rule",
            "gpuplane.checks.causes.gpu_path_id",
            "gpuplane.doctor.health.runtimeclass",
            "gpuplane.doctor.symptoms._runtimeclass_symptom",
            "gpuplane.rules.device_plugins.check_runtime_class_handlers",
            "gpuplane.policy.foreign._runtime_classes",
        ),
        tests=(
            "tests/pure/test_rules_cluster.py::test_fm11_operator_runtime_class_differs_from_stack",
            "tests/real/test_rules_cluster_workloads.py::test_fm11_counts_mig_and_init_containers_but_not_cpu_pods",
            "tests/real/test_rules_cluster_workloads.py::test_fm11_hami_pod_for_another_scheduler_needs_the_class",
            "tests/real/test_rules_cluster_workloads.py::test_fm11_runtime_class_conditions",
            "tests/pure/test_foreign_stacks.py::test_fm11_a_runtime_class_whose_handler_the_operators_toolkit_never_creates",
            "tests/pure/test_fm11_runtime_handlers.py::test_fm11_runtime_class_handler_is_judged_with_the_hosts_toolkit",
            "tests/pure/test_fm11_runtime_handlers.py::test_fm11_workload_naming_a_runtime_class_the_hosts_toolkit_has_not",
            "tests/pure/test_fm11_runtime_handlers.py::test_fm11_foreign_runtime_class_is_judged_from_the_pack_config",
            "tests/pure/test_fm11_runtime_handlers.py::test_fm11_foreign_runtime_class_without_runtime_facts_is_advice",
            "tests/pure/test_fm11_runtime_handlers.py::test_fm11_node_runtime_handlers_follow_the_toolkit",
        ),
    ),
    "FM12": _entry(
        checks=(
            "gpuplane.rules.hami._unwanted",
            "gpuplane.rules.operator._device_plugin",
            "gpuplane.rules.platform._device_plugin",
            "gpuplane.rules.platform.check_platform_hami",
            "gpuplane.rules.device_plugins.check_device_plugin_daemonsets",
            "gpuplane.checks.allocatable.allocatable_findings",
            "gpuplane.checks.causes._event_rule",
            "gpuplane.doctor.health.allocatable",
        ),
        tests=(
            "tests/pure/test_rules_cluster.py::test_fm12_hami_release_on_an_operator_stack",
            "tests/pure/test_rules_cluster.py::test_fm12_operator_device_plugin_default_with_hami",
            "tests/pure/test_checks_verdicts.py::test_hami_flip_back_to_physical_is_fm12",
            "tests/pure/test_doctor_api_cases.py::test_fm12_from_the_operator_daemonset_when_its_pods_were_not_kept",
            "tests/pure/test_foreign_stacks.py::test_fm12_a_device_plugin_daemonset_beside_the_operators_plugin",
        ),
    ),
    "FM13": _entry(
        checks=(
            "gpuplane.rules.hami._exemptions",
            "gpuplane.rules.hami._node_selector",
            "gpuplane.rules.hami._runtime_class",
            "gpuplane.rules.hami._scheduler_tag",
            "gpuplane.rules.hami._toolkit_ready",
            "gpuplane.rules.hami._webhook",
            "gpuplane.rules.hami.check_hami_nodes",
            "gpuplane.rules.operator._cdi",
            "gpuplane.rules.platform.check_platform_hami",
            "gpuplane.checks.allocatable.allocatable_findings",
            "gpuplane.checks.causes._event_rule",
            "gpuplane.checks.causes.device_plugin_id",
            "gpuplane.checks.verdicts.hami_memory_findings",
            "gpuplane.doctor.health._device_plugin",
            "gpuplane.doctor.health._scheduler_tag",
            "gpuplane.doctor.health._webhooks",
            "gpuplane.doctor.health.hami_health",
            "gpuplane.doctor.symptoms._insufficient",
            "gpuplane.doctor.symptoms.classify",
        ),
        tests=(
            "tests/pure/test_hami_alone.py::test_fm13_the_toolkit_ready_wait_on_the_hosts_toolkit",
            "tests/pure/test_rules_cluster.py::test_fm13_hami_runtime_class",
            "tests/pure/test_rules_cluster.py::test_fm13_hami_webhook",
            "tests/pure/test_rules_cluster.py::test_fm13_operator_cdi_with_hami",
            "tests/pure/test_rules_cluster.py::test_fm13_fm18_scheduler_tag_key_follows_chart_version",
        ),
    ),
    "FM14": _entry(
        checks=(
            "gpuplane.rules.hami._split",
            "gpuplane.rules.workloads._hami",
            "gpuplane.rules.workloads.check_workload",
            "gpuplane.checks.verdicts.hami_memory_findings",
            "gpuplane.checks.verdicts.probe_findings",
            "gpuplane.doctor.health._never_fit",
        ),
        tests=(
            "tests/pure/test_rules_cluster.py::test_fm14_hami_split_settings",
            "tests/real/test_rules_cluster_workloads.py::test_fm14_cuda_disable_control_is_a_warning",
            "tests/real/test_rules_cluster_workloads.py::test_fm14_gpu_count_against_nodes",
            "tests/real/test_rules_cluster_workloads.py::test_fm14_gpucores",
        ),
    ),
    "FM15": _entry(
        checks=(
            "gpuplane.rules.platform._cos_dirs",
            "gpuplane.rules.platform._driver_root",
            "gpuplane.rules.platform.check_dra_driver_root",
            "gpuplane.rules.toolkit._toolkit_flavour",
            "gpuplane.checks.causes._event_rule",
            "gpuplane.doctor.nodes._glibc_symptoms",
            "gpuplane.doctor.symptoms.glibc_fallback",
        ),
        tests=(
            "tests/pure/test_rules_cluster.py::test_fm15_flavour_table",
            "tests/pure/test_hami_driver_root.py::test_fm15_foreign_hami_without_the_cos_driver_root",
            "tests/pure/test_hami_driver_root.py::test_fm15_foreign_dra_driver_release_on_cos",
            "tests/pure/test_rules_cluster.py::test_fm15_full_image_reference_and_disabled_toolkit",
            "tests/pure/test_rules_cluster.py::test_incident_2_ubuntu_toolkit_default_on_amazon_linux_2_is_fm15",
            "tests/real/test_doctor_robust.py::test_containerd_outside_the_model_is_noted_and_fm15_still_found",
        ),
    ),
    "FM16": _entry(
        checks=(
            "gpuplane.rules.containerd.runtimes.fm16",
            "gpuplane.rules.operator._cdi",
            "gpuplane.checks.causes._event_rule",
        ),
        tests=(
            "tests/pure/test_rules_cluster.py::test_fm16_cdi_on_containerd_1_6",
            "tests/pure/test_rules_containerd.py::test_fm16_cdi_on_1_6",
            "tests/real/test_rules_states.py::test_fm16_final_state_findings_name_the_toolkit_state",
            "tests/pure/test_checks_verdicts.py::test_fm16_symptoms_map_to_rules",
        ),
    ),
    "FM17": _entry(
        checks=(
            "gpuplane.rules.docker.check_docker_daemons",
            "gpuplane.rules.toolkit._detected_config",
            "gpuplane.rules.toolkit._toolkit_env",
            "gpuplane.rules.toolkit._toolkit_env_paths",
            "gpuplane.doctor.nodes._wrong_daemon",
        ),
        tests=(
            "tests/pure/test_rules_cluster.py::test_fm17_config_source_alone_is_a_warning",
            "tests/pure/test_rules_cluster.py::test_fm17_drop_in_only_checked_where_the_toolkit_writes_one",
            "tests/pure/test_rules_cluster.py::test_fm17_malformed_env_and_value_from",
            "tests/pure/test_rules_cluster.py::test_fm17_only_when_the_operator_runs_the_toolkit",
            "tests/pure/test_rules_all_at_once.py::test_fm17_malformed_env_with_a_socket_problem_still_reports_an_invalid_default",
        ),
    ),
    "FM18": _entry(
        checks=(
            "gpuplane.rules.pinning.check_chart_version",
            "gpuplane.rules.pinning.check_image_tags",
            "gpuplane.rules.known_bad.check_known_bad_release",
        ),
        tests=(
            "tests/pure/test_rules_cluster.py::test_fm18_hami_chart_and_images",
            "tests/pure/test_rules_cluster.py::test_fm18_image_tags",
            "tests/pure/test_rules_cluster.py::test_fm18_operator_chart_version",
            "tests/pure/test_rules_known_bad.py::test_fm18_known_bad_v24_9_0_on_rancher_distros",
            "tests/pure/test_rules_cluster.py::test_fm13_fm18_scheduler_tag_key_follows_chart_version",
            "tests/pure/test_dra_stack.py::test_fm18_an_unpinned_dra_chart",
        ),
    ),
}

_DATA.update(SHARING_REGISTRY)   # FM19-FM29 (gpuplane.rules.sharing_registry)
_DATA.update(DRA_REGISTRY)   # FM30-FM38 (gpuplane.rules.dra_catalogue)

REGISTRY: dict[str, RuleIndex] = {
    rule_id: RuleIndex(rule_id, checks, tests)
    for rule_id, (checks, tests) in sorted(_DATA.items())
}


def find(rule_id: str) -> RuleIndex:
    """The index of one rule (`fm11` works too). Raises KeyError for an unknown id."""
    return REGISTRY[rule_id.strip().upper()]


def describe(rule_id: str) -> str:
    """Plain text: the rule's title, then where it is emitted, which event texts point at
    it and which tests hold it."""
    index = find(rule_id)
    lines = [f"{index.id}: {index.rule.title}", "Emitted by:"]
    lines += [f"  {name}" for name in index.checks]
    if index.events:
        lines.append("Event texts (gpuplane.rules.events):")
        lines += [f"  {c.key}: /{c.pattern.pattern}/" for c in index.events]
    lines.append("Tests:")
    lines += [f"  {test}" for test in index.tests]
    return "\n".join(lines)


__all__ = ["REGISTRY", "RuleIndex", "describe", "find", "module_of", "resolve"]
