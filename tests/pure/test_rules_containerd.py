"""The containerd rules on in-memory layouts, per release line where behaviour differs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplane.containerd import ContainerdVersion, MemoryFiles, effective_config
from gpuplane.containerd.toml_io import line_of
from gpuplane.core.findings import Finding, Severity
from gpuplane.rules import RULES, ContainerdFacts, check_containerd, explain
from gpuplane.rules.containerd import analyse

TOP = "/etc/containerd/config.toml"
CONF_D = "/etc/containerd/conf.d"
V2 = '"io.containerd.grpc.v1.cri"'
V3 = '"io.containerd.cri.v1.runtime"'
KEYS = {0: "cri", 2: V2, 3: V3}


def top(version: int = 2, imports: str = f'["{CONF_D}/*.toml"]', body: str = "") -> str:
    head = f"version = {version}\n" if version else ""
    return f"{head}imports = {imports}\n{body}"


def runtime(name: str, version: int = 2, systemd: bool | None = True, binary: str | None = None,
            runtime_type: bool = True) -> str:
    key = KEYS[version]
    text = f"[plugins.{key}.containerd.runtimes.{name}]\n"
    if runtime_type:
        text += 'runtime_type = "io.containerd.runc.v2"\n'
    options = []
    if binary:
        options.append(f'BinaryName = "{binary}"')
    if systemd is not None:
        options.append(f"SystemdCgroup = {str(systemd).lower()}")
    if options:
        text += f"[plugins.{key}.containerd.runtimes.{name}.options]\n" + "\n".join(options) + "\n"
    return text


def default(name: str, version: int = 2) -> str:
    return f'[plugins.{KEYS[version]}.containerd]\ndefault_runtime_name = "{name}"\n'


def drop_in(version: int, *parts: str) -> str:
    return (f"version = {version}\n" if version else "") + "".join(parts)


RUNC_DROP_IN = drop_in(2, default("runc"), runtime("runc"))
NVIDIA_ONLY = drop_in(2, runtime("nvidia", binary="/usr/bin/nvidia-container-runtime"))
NVIDIA_WHOLE = drop_in(2, default("runc"), runtime("runc"),
                       runtime("nvidia", binary="/usr/bin/nvidia-container-runtime"))


def incident() -> dict[str, str]:
    """k8s-snap: the distro's runc drop-in plus a toolkit drop-in with nvidia only."""
    return {TOP: top(), f"{CONF_D}/00-k8s-runc.toml": RUNC_DROP_IN,
            f"{CONF_D}/99-nvidia.toml": NVIDIA_ONLY}


def check(layout: dict[str, str], line: str, **facts) -> list[Finding]:
    eff = effective_config(TOP, MemoryFiles(layout), ContainerdVersion.parse(line))
    return check_containerd(ContainerdFacts(eff, **facts))


def by_id(findings: list[Finding], rule: str) -> list[Finding]:
    return [f for f in findings if f.id == rule]


NVIDIA = frozenset({"nvidia"})


# ---------------------------------------------------------------- FM02

@pytest.mark.parametrize("line", ["1.6", "1.7"])
def test_fm02_incident_drop_ins_lose_runc_before_2_1(line: str) -> None:
    findings = check(incident(), line, expected_runtimes=NVIDIA)
    assert [f.id for f in findings] == ["FM02"]  # the default-runtime refusal is inside it
    (finding,) = findings
    assert finding.severity is Severity.ERROR
    assert finding.where == f"{CONF_D}/99-nvidia.toml:2"
    assert "runtime runc" in finding.message and "00-k8s-runc.toml" in finding.message
    assert "no corresponding runtime configured" in finding.message
    assert "99-nvidia.toml" in finding.fix and "2.1" in finding.fix


def test_incident_drop_ins_are_clean_on_2_1() -> None:
    assert check(incident(), "2.1", expected_runtimes=NVIDIA) == []


@pytest.mark.parametrize("line", ["1.6", "1.7", "2.1"])
def test_whole_cri_table_in_one_drop_in_is_clean_everywhere(line: str) -> None:
    layout = {**incident(), f"{CONF_D}/99-nvidia.toml": NVIDIA_WHOLE}
    assert check(layout, line, expected_runtimes=NVIDIA, kubelet_cgroup_driver="systemd") == []


@pytest.mark.parametrize("line", ["1.6", "1.7"])
def test_registry_only_drop_in_wipes_runtimes_and_options(line: str) -> None:
    layout = {**incident(), f"{CONF_D}/99-nvidia.toml": NVIDIA_WHOLE,
              f"{CONF_D}/zz-registry.toml": drop_in(2, f'[plugins.{V2}.registry]\n'
                                                       'config_path = "/etc/containerd/certs.d"\n')}
    (finding,) = check(layout, line, expected_runtimes=NVIDIA)
    assert finding.id == "FM02"
    assert finding.where.startswith(f"{CONF_D}/zz-registry.toml:")
    assert "runtime nvidia" in finding.message
    assert "SystemdCgroup = true of runtime runc" in finding.message
    assert check(layout, "2.1", expected_runtimes=NVIDIA) == []


def test_runtimes_table_without_runc_replaces_the_built_in_one_on_1_x() -> None:
    layout = {TOP: top(imports="[]", body=runtime("nvidia", systemd=None))}
    (finding,) = check(layout, "1.7")
    assert finding.id == "FM02" and "built-in runc" in finding.message
    assert "default_runtime_name = \"runc\"" in finding.message
    assert check(layout, "2.1") == []


# ---------------------------------------------------------------- FM03

def test_v3_drop_in_on_1_7_is_refused_once() -> None:
    layout = {TOP: top(body=default("runc") + runtime("runc")),
              f"{CONF_D}/99-nvidia.toml": drop_in(3, runtime("nvidia", version=3))}
    findings = check(layout, "1.7", expected_runtimes=NVIDIA)
    assert [f.id for f in findings] == ["FM03"]
    assert "version = 3" in findings[0].message and "runtime nvidia" in findings[0].message
    assert findings[0].where == f"{CONF_D}/99-nvidia.toml:1"


def test_v3_drop_in_on_1_6_is_ignored_as_an_unknown_plugin() -> None:
    layout = {TOP: top(body=default("runc") + runtime("runc")),
              f"{CONF_D}/99-nvidia.toml": drop_in(3, runtime("nvidia", version=3))}
    (finding,) = check(layout, "1.6", expected_runtimes=NVIDIA)
    assert finding.id == "FM03" and "unknown plugin" in finding.message
    assert finding.where == f"{CONF_D}/99-nvidia.toml:2"


def test_v2_top_with_v3_drop_in_on_2_1_ignores_the_v2_section() -> None:
    layout = {TOP: top(body=default("runc") + runtime("runc")),
              f"{CONF_D}/99-nvidia.toml": drop_in(3, runtime("nvidia", version=3))}
    (finding,) = check(layout, "2.1", expected_runtimes=NVIDIA)
    assert finding.id == "FM03"
    assert finding.where.startswith(f"{TOP}:")
    assert "SystemdCgroup = true of runtime runc" in finding.message
    assert "99-nvidia.toml says version 3" in finding.message


def test_v3_top_with_v2_drop_in_on_2_1_drops_nvidia_in_migration() -> None:
    layout = {TOP: top(3, body=runtime("runc", version=3)),
              f"{CONF_D}/99-nvidia.toml": drop_in(2, runtime("nvidia"))}
    (finding,) = check(layout, "2.1", expected_runtimes=NVIDIA)
    assert finding.id == "FM03" and "migration" in finding.message
    assert "runtime nvidia" in finding.message
    assert finding.where == f"{CONF_D}/99-nvidia.toml:2"
    assert "version 3" in finding.fix


@pytest.mark.parametrize("line", ["1.6", "1.7"])
def test_fm03_v1_drop_in_in_a_v2_config_is_refused_on_1_x(line: str) -> None:
    layout = {TOP: top(body=default("runc") + runtime("runc")),
              f"{CONF_D}/99-nvidia.toml": drop_in(0, runtime("nvidia", version=0))}
    (finding,) = check(layout, line, expected_runtimes=NVIDIA)
    assert finding.id == "FM03" and 'invalid plugin key URI "cri"' in finding.message
    assert finding.where == f"{CONF_D}/99-nvidia.toml:1"


def test_v1_top_level_runtimes_are_ignored_on_2_1() -> None:
    body = default("runc", 0) + runtime("runc", 0) + runtime("nvidia", 0)
    layout = {TOP: top(0, imports="[]", body=body)}
    (finding,) = check(layout, "2.1", expected_runtimes=NVIDIA)
    assert finding.id == "FM03" and "version 1 (no `version` key)" in finding.message
    assert "runtime nvidia" in finding.message and "SystemdCgroup" in finding.message
    assert check(layout, "1.7", expected_runtimes=NVIDIA) == []


@pytest.mark.parametrize("line", ["1.6", "1.7", "2.1"])
def test_version_2_tables_without_a_version_key_are_ignored(line: str) -> None:
    """Measured: every line ignores these tables (1.x reads version 1 `plugins.cri`, 2.x
    assumes version 3), so nvidia and SystemdCgroup vanish without an error."""
    body = default("runc") + runtime("runc") + runtime("nvidia")
    layout = {TOP: top(0, imports="[]", body=body)}
    (finding,) = check(layout, line, expected_runtimes=NVIDIA)
    assert finding.id == "FM03" and "the version-2 name" in finding.message
    assert "runtime nvidia" in finding.message
    assert finding.fix.startswith(f"Set `version = 2` in {TOP}")
    assert check({TOP: top(2, imports="[]", body=body)}, line, expected_runtimes=NVIDIA) == []


@pytest.mark.parametrize("line", ["1.7", "2.1"])
def test_fm03_runtime_without_runtime_type(line: str) -> None:
    layout = {TOP: top(imports="[]", body=default("runc") + runtime("runc")
                       + runtime("nvidia", runtime_type=False))}
    (finding,) = check(layout, line)
    assert finding.id == "FM03" and "runtime_type" in finding.message
    assert finding.where == f"{TOP}:9"
    fixed = {TOP: top(imports="[]", body=default("runc") + runtime("runc") + runtime("nvidia"))}
    assert check(fixed, line) == []


def test_wrongly_typed_field_is_reported_with_its_line() -> None:
    layout = {TOP: top(imports="[]", body=f"[plugins.{V2}.containerd]\n"
                       "default_runtime_name = 42\n" + runtime("runc"))}
    (finding,) = check(layout, "1.7")
    assert finding.id == "FM03" and "default_runtime_name must be a string" in finding.message
    assert finding.where == f"{TOP}:4"


def _k8s_snap_with_runc_drop_in() -> dict[str, str]:
    """k8sd's top-level file (pause image, CNI dirs, registry hosts dir) plus the community
    `00-k8s-runc.toml`, which holds a CRI table with runc only."""
    top_text = top(body=f'[plugins.{V2}]\nsandbox_image = "ghcr.io/canonical/k8s-snap/pause:3.10"\n'
                   f'[plugins.{V2}.cni]\nbin_dir = "/opt/cni/bin"\nconf_dir = "/etc/cni/net.d"\n'
                   f'[plugins.{V2}.registry]\nconfig_path = "/etc/containerd/hosts.d"\n')
    return {TOP: top_text, f"{CONF_D}/00-k8s-runc.toml": RUNC_DROP_IN}


@pytest.mark.parametrize("line", ["1.6", "1.7", "2.1"])
def test_fm02_every_cri_setting_a_later_table_drops_is_reported(line: str) -> None:
    findings = by_id(check(_k8s_snap_with_runc_drop_in(), line), "FM02")
    if line == "2.1":
        assert findings == []   # deep merge: nothing dropped
        return
    (finding,) = findings
    for lost in ('sandbox_image = "ghcr.io/canonical/k8s-snap/pause:3.10"',
                 'cni.bin_dir = "/opt/cni/bin"',
                 'registry.config_path = "/etc/containerd/hosts.d"'):
        assert lost in finding.message, finding.message
    assert "conf_dir" not in finding.message   # containerd's own default: nothing lost
    assert finding.severity is Severity.ERROR   # the CNI dirs: pod networking
    assert finding.where.startswith(f"{CONF_D}/00-k8s-runc.toml")
    # Without the CNI dirs the loss is still an error (#39): the sandbox image and the
    # registry config_path are lost now, so pulls leave the node's mirrors.
    layout = _k8s_snap_with_runc_drop_in()
    layout[TOP] = layout[TOP].replace(f'[plugins.{V2}.cni]\nbin_dir = "/opt/cni/bin"\n'
                                      'conf_dir = "/etc/cni/net.d"\n', "")
    (finding,) = by_id(check(layout, line), "FM02")
    assert finding.severity is Severity.ERROR and "cni" not in finding.message


# ---------------------------------------------------------------- FM07

def test_fm07_systemd_cgroup_disagreement_between_runtimes() -> None:
    layout = {TOP: top(imports="[]", body=default("runc") + runtime("runc")
                       + runtime("nvidia", systemd=None))}
    (finding,) = check(layout, "2.1")
    assert finding.id == "FM07" and "nvidia=false" in finding.message
    assert finding.where == f"{TOP}:9"  # the nvidia runtime, the odd one out


def test_fm07_systemd_cgroup_against_the_kubelet() -> None:
    layout = {TOP: top(imports="[]", body=default("runc") + runtime("runc")
                       + runtime("nvidia"))}
    assert check(layout, "1.7", kubelet_cgroup_driver="systemd") == []
    (finding,) = check(layout, "1.7", kubelet_cgroup_driver="cgroupfs")
    assert finding.id == "FM07"
    assert finding.fix == "Set SystemdCgroup = false in the options of nvidia, runc."


def _kubespray(line_version: int, runc_key: str, nvidia_key: str) -> dict[str, str]:
    """Kubespray <= 2.27's spelling (`systemdCgroup`) on runc, the toolkit's on nvidia."""
    k = KEYS[line_version]
    return {TOP: top(line_version, imports="[]", body=default("runc", line_version)
                     + f"[plugins.{k}.containerd.runtimes.runc]\n"
                     'runtime_type = "io.containerd.runc.v2"\n'
                     f"[plugins.{k}.containerd.runtimes.runc.options]\n{runc_key} = true\n"
                     f"[plugins.{k}.containerd.runtimes.nvidia]\n"
                     'runtime_type = "io.containerd.runc.v2"\n'
                     f"[plugins.{k}.containerd.runtimes.nvidia.options]\n"
                     f"{nvidia_key} = true\n")}


@pytest.mark.parametrize("line", ["1.6", "1.7", "2.0", "2.2"])
def test_fm07_systemd_cgroup_read_with_containerds_own_key_matching(line: str) -> None:
    version = 3 if line.startswith("2") else 2
    # systemdCgroup and SystemdCgroup are one setting to every line: no disagreement.
    assert check(_kubespray(version, "systemdCgroup", "SystemdCgroup"), line) == []
    assert check(_kubespray(version, "systemdCgroup", "SystemdCgroup"), line,
                 kubelet_cgroup_driver="systemd") == []
    # SystemdCGroup means SystemdCgroup to 2.x only; 1.x never decodes it (runc: false).
    findings = check(_kubespray(version, "SystemdCGroup", "SystemdCgroup"), line)
    if line.startswith("2"):
        assert findings == []
    else:
        (finding,) = findings
        assert finding.id == "FM07" and "runc=false" in finding.message
        assert "SystemdCGroup" in finding.message  # says why: the spelling


# ---------------------------------------------------------------- FM16

def test_fm16_cdi_on_1_6() -> None:
    clean = {TOP: top(imports="[]", body=default("runc") + runtime("runc"))}
    (finding,) = check(clean, "1.6", cdi_requested=True)
    assert finding.id == "FM16" and finding.where == "gpuOperator.cdi"
    assert "gpuOperator.cdi: false" in finding.fix
    assert check(clean, "1.7", cdi_requested=True) == []
    assert check(clean, "1.6", cdi_requested=False) == []
    in_file = {TOP: clean[TOP] + f"[plugins.{V2}]\nenable_cdi = true\n"}
    (finding,) = check(in_file, "1.6")
    assert finding.id == "FM16" and finding.where == f"{TOP}:10"


# ---------------------------------------------------------------- FM01

def test_planned_drop_in_outside_imports() -> None:
    planned = "/etc/containerd/config.d/99-nvidia.toml"
    layout = {TOP: top(body=default("runc") + runtime("runc")),
              f"{CONF_D}/00-k8s-runc.toml": RUNC_DROP_IN, planned: NVIDIA_WHOLE}
    findings = check(layout, "1.7", expected_runtimes=NVIDIA, expected_files=(planned,),
                     unread_files=(planned,))
    assert [(f.id, f.severity) for f in findings] == [("FM01", Severity.ERROR)]
    assert '"/etc/containerd/config.d/*.toml"' in findings[0].fix
    assert findings[0].where == f"{TOP}:2"
    assert "nvidia" in findings[0].message
    inside = f"{CONF_D}/99-nvidia.toml"
    layout = {**layout, inside: layout.pop(planned)}
    assert check(layout, "1.7", expected_runtimes=NVIDIA, expected_files=(inside,)) == []


def test_planned_drop_in_covered_by_a_glob_but_absent() -> None:
    planned = f"{CONF_D}/99-nvidia.toml"
    layout = {TOP: top(body=default("runc") + runtime("runc"))}
    (finding,) = check(layout, "2.1", expected_files=(planned,))
    assert finding.id == "FM01" and "not found" in finding.message


def test_expected_runtime_defined_nowhere_and_unread_file() -> None:
    unread = "/etc/containerd/config.d/99-nvidia.toml"
    layout = {TOP: top(imports="[]", body=default("runc") + runtime("runc"))}
    (finding,) = check(layout, "2.1", expected_runtimes=NVIDIA, unread_files=(unread,))
    assert finding.id == "FM01" and finding.severity is Severity.ERROR
    assert unread in finding.message
    (warning,) = check(layout, "2.1", unread_files=(unread,))
    assert warning.severity is Severity.WARNING and warning.where == unread


def test_expected_default_runtime_missing_carries_the_refusal() -> None:
    layout = {TOP: top(imports="[]", body=default("nvidia") + runtime("runc"))}
    (finding,) = check(layout, "1.7", expected_runtimes=NVIDIA)
    assert finding.id == "FM01" and "no corresponding runtime configured" in finding.message


def test_missing_literal_import_and_empty_glob() -> None:
    body = default("runc") + runtime("runc")
    layout = {TOP: top(imports='["/etc/containerd/nvidia.toml"]', body=body)}
    (finding,) = check(layout, "2.1")
    assert finding.id == "FM01" and finding.severity is Severity.ERROR
    assert "refuses to start" in finding.message and finding.where == f"{TOP}:2"
    (info,) = check({TOP: top(body=body)}, "2.1")
    assert info.id == "FM01" and info.severity is Severity.INFO


def test_relative_glob_on_1_6_resolves_against_the_working_dir() -> None:
    layout = {TOP: top(imports='["conf.d/*.toml"]', body=default("runc") + runtime("runc")),
              f"{CONF_D}/99-nvidia.toml": NVIDIA_WHOLE}
    (warning,) = check(layout, "1.6")
    assert warning.id == "FM01" and warning.severity is Severity.WARNING
    assert f'"{CONF_D}/*.toml"' in warning.fix
    (error,) = check(layout, "1.6", expected_runtimes=NVIDIA)  # the glob is why: one finding
    assert error.id == "FM01" and error.severity is Severity.ERROR
    assert "working directory" in error.message and f'"{CONF_D}/*.toml"' in error.fix
    assert check(layout, "1.7", expected_runtimes=NVIDIA) == []


# ---------------------------------------------------------------- FM09 and general

def test_default_runtime_left_pointing_at_nvidia() -> None:
    layout = {TOP: top(imports="[]", body=default("nvidia") + runtime("runc"))}
    (finding,) = check(layout, "2.1")
    assert finding.id == "FM09" and finding.where == f"{TOP}:4"


def test_errors_come_first_and_prefix_names_the_node() -> None:
    layout = {TOP: top(body=default("runc") + runtime("runc"))}
    findings = check(layout, "1.6", cdi_requested=True, config_key_prefix="node-a")
    assert [f.severity for f in findings] == [Severity.ERROR, Severity.INFO]
    assert all(f.where.startswith("node-a: ") for f in findings)


def test_line_of_finds_nested_headers_and_dotted_keys() -> None:
    text = f'version = 2\n[plugins.{V2}]\n  containerd.runtimes.nvidia.runtime_type = "x"\n'
    assert line_of(text, ("plugins", "io.containerd.grpc.v1.cri")) == 2
    assert line_of(text, ("plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes",
                         "nvidia")) == 3
    assert line_of(text, ("plugins", "other")) is None


def test_catalogue_covers_every_failure_mode() -> None:
    assert list(RULES) == [f"FM{n:02d}" for n in range(1, 39)]
    for rule in RULES.values():
        assert rule.why and rule.example and rule.fix and rule.symptom
        assert rule.title in explain(rule.id.lower())
    with pytest.raises(KeyError):
        explain("FM99")


# ---------------------------------------------------------------- properties

RUNTIME_NAMES = st.sampled_from(["runc", "nvidia", "kata"])


@st.composite
def cri_file(draw: st.DrawFn, version: int) -> str:
    parts = []
    if draw(st.booleans()):
        parts.append(default(draw(RUNTIME_NAMES), version))
    for name in draw(st.lists(RUNTIME_NAMES, max_size=3, unique=True)):
        parts.append(runtime(name, version, systemd=draw(st.sampled_from([True, False, None])),
                             runtime_type=draw(st.booleans())))
    if draw(st.booleans()):
        cdi = "true" if draw(st.booleans()) else "false"
        parts.append(f"[plugins.{KEYS[version]}]\nenable_cdi = {cdi}\n")
    return "".join(parts)


@st.composite
def layouts(draw: st.DrawFn, versions: st.SearchStrategy[int]) -> dict[str, str]:
    top_version = draw(versions)
    layout = {TOP: top(top_version, body=draw(cri_file(top_version)))}
    for index in range(draw(st.integers(0, 3))):
        version = draw(versions)
        layout[f"{CONF_D}/{index:02d}-x.toml"] = drop_in(version, draw(cri_file(version)))
    return layout


def _facts(layout: dict[str, str], line: str) -> ContainerdFacts:
    eff = effective_config(TOP, MemoryFiles(layout), ContainerdVersion.parse(line))
    return ContainerdFacts(eff, expected_runtimes=NVIDIA)


@settings(max_examples=150, deadline=None)
@given(layouts(st.sampled_from([0, 2, 3])))
def test_never_fm02_on_2_1(layout: dict[str, str]) -> None:
    findings = check_containerd(_facts(layout, "2.1"))
    assert "FM02" not in {f.id for f in findings}
    assert len(set(findings)) == len(findings)
    assert all(f.id in RULES and f.where and f.fix and f.message for f in findings)


@settings(max_examples=150, deadline=None)
@given(layouts(st.just(2)))
def test_single_version_layouts_lose_nothing_on_2_1(layout: dict[str, str]) -> None:
    assert analyse(_facts(layout, "2.1")).losses == []


@settings(max_examples=150, deadline=None)
@given(layouts(st.just(2)), st.sampled_from(["1.6", "1.7"]))
def test_losses_on_1_x_are_only_replacement(layout: dict[str, str], line: str) -> None:
    """Same-version files on 1.x can lose settings only to table replacement (FM02), and
    only when more than one file carries a CRI table."""
    facts = _facts(layout, line)
    analysis = analyse(facts)
    assert {analysis.rule_of(x) for x in analysis.losses} <= {"FM02"}
    holders = [f for f in facts.effective.files if "io.containerd.grpc.v1.cri" in f.plugins]
    if len(holders) <= 1:
        assert analysis.losses == []


@settings(max_examples=200, deadline=None)
@given(layouts(st.sampled_from([0, 2, 3])), st.sampled_from(["1.6", "1.7", "2.1"]))
def test_every_refusal_is_an_error_and_told_once(layout: dict[str, str], line: str) -> None:
    facts = _facts(layout, line)
    findings = check_containerd(facts)
    refusals = facts.effective.refusals
    if refusals:
        assert any(f.severity is Severity.ERROR for f in findings)
    told = sum("no corresponding runtime configured" in f.message for f in findings)
    assert told == sum(r.startswith("no corresponding runtime configured") for r in refusals)


@pytest.mark.parametrize("line", ["1.7", "2.0", "2.2"])
def test_fm03_a_doubly_named_v1_plugin_is_unpredictable_on_2x(line: str) -> None:
    """The toolkit's version-1 engine writes `plugins.cri` into a version-less file that
    already names `plugins."io.containerd.grpc.v1.cri"`. containerd 2.x keeps either table
    (a Go map walk: both outcomes measured with the real 2.0 and 2.2); 1.x reads only the
    short name. The plan cannot predict 2.x, so it refuses the layout."""
    layout = {
        "/etc/containerd/config.toml": (
            'version = 1\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
            '[plugins.cri.containerd.runtimes.nvidia]\nruntime_type = "io.containerd.runc.v2"\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
            'runtime_type = "io.containerd.runc.v2"\n'),
        "/etc/containerd/conf.d/10-registry.toml": (
            'version = 2\n[plugins."io.containerd.grpc.v1.cri".registry]\nconfig_path = "/x"\n'),
    }
    eff = effective_config("/etc/containerd/config.toml", MemoryFiles(layout),
                           ContainerdVersion.parse(line))
    found = [f for f in check_containerd(ContainerdFacts(effective=eff))
             if "changes from one start" in f.message]
    if line.startswith("1."):
        assert not eff.ambiguities and not found
    else:
        assert eff.ambiguities and found and found[0].severity is Severity.ERROR
        assert found[0].id == "FM03" and "version = 2" in found[0].fix
