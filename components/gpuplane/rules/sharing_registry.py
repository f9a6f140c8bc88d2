"""The registry rows of FM19-FM28: how a GPU is shared (MIG, MPS, time-slicing per pool:
FM19-FM25) and how it reaches the containers (the NRI plugin and CDI: FM26-FM28).

Kept apart from `registry.py`, which merges them in, so that each module stays one screen
of data: for each id, the functions that emit it and the tests that hold it.
"""

from __future__ import annotations

# The sharing rules' tests (FM19-FM25) live in one file.
_SHARING = "tests/pure/test_rules_sharing.py::"


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
        tests=(f"{_SHARING}test_fm20_layout_the_gpu_cannot_make",)),
    "FM21": _entry(
        checks=("gpuplane.rules.sharing._single_mixes",),
        tests=(f"{_SHARING}test_fm21_single_strategy_over_balanced_layout",)),
    "FM22": _entry(
        checks=(
            "gpuplane.rules.sharing.check_pools",
            "gpuplane.rules.sharing._mps_on_mig",
            "gpuplane.rules.sharing.check_mps_profiles",
        ),
        tests=(
            f"{_SHARING}test_fm22_mps_on_mig_instances",
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
        checks=("gpuplane.rules.sharing.check_workload_sharing",),
        tests=(
            f"{_SHARING}test_fm24_two_gpus_on_an_mps_pool",
            f"{_SHARING}test_fm24_time_slicing_only_with_fail_requests_greater_than_one",
        )),
    "FM25": _entry(
        checks=("gpuplane.rules.sharing.check_workload_sharing",),
        tests=(f"{_SHARING}test_fm25_whole_gpu_asked_on_a_mixed_mig_pool",)),
    "FM26": _entry(
        checks=("gpuplane.rules.workloads._fm26",),
        tests=(
            "tests/pure/test_rules_nri.py::test_fm26_pod_naming_a_deleted_runtime_class",
            "tests/pure/test_rules_nri.py::test_fm26_foreign_program_with_nri_release",
            "tests/pure/test_rules_nri.py::test_fm26_fm11_runtime_class_handlers_under_nri",
            "tests/pure/test_rules_nri.py::test_fm26_foreign_runtime_class_beside_an_nri_release",
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
}

__all__ = ["SHARING_REGISTRY"]
