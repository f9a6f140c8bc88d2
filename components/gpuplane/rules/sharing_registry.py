"""The registry rows of FM19-FM29: how a GPU is shared (MIG, MPS, time-slicing, HAMi's
modes per pool: FM19-FM25, FM29) and how it reaches the containers (the NRI plugin and
CDI: FM26-FM28); and FM29's catalogue entry.

Kept apart from `registry.py` and `catalogue.py`, which merge them in, so that each module
stays one screen of data: for each id, the functions that emit it and the tests that hold
it.
"""

from __future__ import annotations

from typing import Any

from gpuplane.core.findings import Severity

_HAMI = "Project-HAMi/HAMi"

SHARING_RULES: list[dict[str, Any]] = [
    dict(
        id="FM29", severity=Severity.ERROR,
        title="a pool's sharing that the cluster's device plugin never reads",
        symptom="The pool's nodes share their GPUs some other way than the stack says (or "
                "not at all): allocatable shows the cluster's default, not the pool's.",
        why="Time-slicing, MPS and MIG Manager layouts are the GPU Operator device plugin's; "
            "under HAMi that plugin is off and HAMi slices GPUs by its own per-node config "
            "(`operatingmode` hami-core or mig, `devicesplitcount`, "
            "`devicememoryscaling`). HAMi's modes in turn mean nothing to the operator's "
            "plugin. A pool written for the other plugin is never applied.",
        example="`devicePlugin: hami` with `sharing.pools.a100: {mode: time-slicing, "
                "replicas: 4}`, or `mode: hami-core` with the GPU Operator's device plugin.",
        fix="Under HAMi write `mode: hami-core` (deviceSplitCount / deviceMemoryScaling per "
            "pool) or `mode: mig` with gpuModel; under the operator use whole, "
            "time-slicing, mps or a `mig` layout; or switch `gpuplane:devicePlugin`.",
        upstream=f"{_HAMI} pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go"
                 "@v2.8.3, @v2.9.0, @v2.10.0 (readFromConfigFile: the nodeconfig entry named "
                 "like NODE_NAME) and pkg/device/nvidia/device.go@v2.10.0 "
                 "(DevicePluginConfigs); charts/hami/templates/device-plugin/configmap.yaml"
                 "@v2.10.0 (devicePlugin.nodeConfiguration.config as config.json)"),
]

# The sharing rules' tests (FM19-FM25, FM29) live in one file.
_SHARING = "tests/pure/test_rules_sharing.py::"
# FM24/FM25 over programs that install the GPU Operator themselves, and the doctor's.
_PLAIN = "tests/pure/test_sharing_plain.py::"


def _entry(checks: tuple[str, ...], tests: tuple[str, ...]) -> tuple[tuple[str, ...],
                                                                    tuple[str, ...]]:
    return checks, tests


SHARING_REGISTRY: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "FM19": _entry(
        checks=(
            "gpuplane.rules.sharing.check_mig_strategy",
            "gpuplane.doctor.analyse._sharing",
        ),
        tests=(
            f"{_SHARING}test_fm19_fm23_doctor_reads_the_live_configmap_and_node_labels",
            f"{_SHARING}test_fm19_mig_pools_with_different_strategies",
            f"{_SHARING}test_fm19_raw_mig_strategy_contradicts_the_pool",
            f"{_SHARING}test_fm19_plain_install_strategy_mismatch",
        )),
    "FM20": _entry(
        checks=("gpuplane.rules.sharing._fits",),
        tests=(f"{_SHARING}test_fm20_layout_the_gpu_cannot_make",
               f"{_SHARING}test_fm20_hami_mig_mode_on_a_gpu_without_mig",
               f"{_SHARING}test_fm20_fm29_doctor_judges_the_hami_pools_of_the_stacks_intent")),
    "FM21": _entry(
        checks=("gpuplane.rules.sharing._single_mixes",),
        tests=(f"{_SHARING}test_fm21_single_strategy_over_balanced_layout",)),
    "FM22": _entry(
        checks=(
            "gpuplane.rules.sharing._hami_pool",
            "gpuplane.rules.sharing._mps_on_mig",
            "gpuplane.rules.sharing.check_mps_profiles",
        ),
        tests=(
            f"{_SHARING}test_fm22_mps_on_mig_instances",
            f"{_SHARING}test_fm22_mps_on_a_hami_pool",
            f"{_SHARING}test_fm22_fm23_raw_configmap_of_a_plain_install",
        )),
    "FM23": _entry(
        checks=(
            "gpuplane.rules.sharing.check_profile_keys",
            "gpuplane.doctor.analyse._sharing",
        ),
        tests=(
            f"{_SHARING}test_fm19_fm23_doctor_reads_the_live_configmap_and_node_labels",
            f"{_SHARING}test_fm23_plain_install_label_names_missing_key",
            f"{_SHARING}test_fm22_fm23_raw_configmap_of_a_plain_install",
        )),
    "FM24": _entry(
        checks=(
            "gpuplane.rules.sharing.check_workload_sharing",
            "gpuplane.rules.sharing_plain._fm24",
        ),
        tests=(
            f"{_SHARING}test_fm24_two_gpus_on_an_mps_pool",
            f"{_SHARING}test_fm24_time_slicing_only_with_fail_requests_greater_than_one",
            f"{_PLAIN}test_fm24_one_cluster_wide_profile_that_refuses_is_an_error",
            f"{_PLAIN}test_fm24_some_profiles_refuse_is_a_warning_naming_them",
            f"{_PLAIN}test_fm24_default_profile_refusing_only_unlabelled_nodes",
            f"{_PLAIN}test_fm24_not_known_says_nothing",
            f"{_PLAIN}test_fm24_rename_by_default_is_the_shared_name",
            f"{_PLAIN}test_fm24_pack_release_with_its_own_configmap_refuses_two_gpus",
            f"{_PLAIN}test_fm24_pack_configmap_by_name_and_node_patch",
            f"{_PLAIN}test_fm24_doctor_live_nodes_decide_error_or_warning",
            "tests/real/test_sharing_plain_render.py::"
            "test_fm24_fm25_plain_release_values_match_what_the_chart_renders",
        )),
    "FM25": _entry(
        checks=(
            "gpuplane.rules.sharing.check_workload_sharing",
            "gpuplane.rules.sharing_plain._fm25",
        ),
        tests=(
            f"{_SHARING}test_fm25_whole_gpu_asked_on_a_mixed_mig_pool",
            f"{_PLAIN}test_fm25_pod_pinned_to_a_mig_layout_under_mixed",
            f"{_PLAIN}test_fm25_nodes_the_program_partitions_are_not_every_node",
            f"{_PLAIN}test_fm25_pack_cluster_policy_mixed_mig",
        )),
    "FM26": _entry(
        checks=("gpuplane.rules.workloads._fm26",),
        tests=(
            "tests/pure/test_rules_nri.py::test_fm26_pod_naming_a_deleted_runtime_class",
            "tests/pure/test_rules_nri.py::test_fm26_foreign_program_with_nri_release",
            "tests/pure/test_rules_nri.py::test_fm26_fm11_runtime_class_handlers_under_nri",
            "tests/pure/test_rules_nri.py::test_fm26_foreign_runtime_class_beside_an_nri_release",
            "tests/pure/test_rules_nri.py::test_fm26_gpuplane_runtime_class_refused_under_nri",
            "tests/engine/test_nri_engine.py::"
            "test_fm26_fm27_nri_release_under_the_cli_gets_the_offline_verdict",
        ),
    ),
    "FM27": _entry(
        checks=("gpuplane.rules.nri._nri", "gpuplane.rules.containerd.nri.fm27"),
        tests=(
            "tests/pure/test_rules_nri.py::test_fm27_containerd_versions",
            "tests/pure/test_rules_nri.py::test_fm27_doctor_judges_the_nodes_merged_config_under_nri",
            "tests/real/test_nri_toolkit.py::test_fm27_nri_mode_toolkit_writes_no_runtime",
            "tests/pure/test_rules_nri.py::test_fm27_nri_off_in_the_merged_config",
            "tests/pure/test_rules_nri.py::test_fm27_plan_enables_nri_on_1_7",
            "tests/real/test_nri_dump.py::test_fm27_nri_dropin_against_config_dump",
        ),
    ),
    "FM28": _entry(
        checks=("gpuplane.rules.nri._cdi_off",),
        tests=("tests/pure/test_rules_nri.py::test_fm28_cdi_off_on_a_chart_that_turns_it_on",),
    ),
    "FM29": _entry(
        checks=("gpuplane.rules.sharing._hami_pool", "gpuplane.rules.sharing._hami_mode_unread"),
        tests=(
            f"{_SHARING}test_fm29_operator_sharing_on_a_hami_pool",
            f"{_SHARING}test_fm29_hami_mode_without_hami",
            f"{_SHARING}test_fm20_fm29_doctor_judges_the_hami_pools_of_the_stacks_intent",
        )),
}

__all__ = ["SHARING_REGISTRY", "SHARING_RULES"]
