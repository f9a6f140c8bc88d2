"""Each fix the planner prints for a stack file names what the user edits, in the text the
user wrote: the raw number to quote, the secret to encrypt. Through the real CLI entry."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpuplane.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
STACKS = ROOT / "stacks"


def plan(capsys: pytest.CaptureFixture[str], stacks: Path, name: str,
         *extra: str) -> tuple[int, str, str]:
    code = main(["plan", "--stack", name, "--stacks-dir", str(stacks), *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project root (Pulumi.yaml) with a copy of the bundled stacks in stacks/."""
    (tmp_path / "Pulumi.yaml").write_text("name: gpuplane\n")
    shutil.copytree(STACKS, tmp_path / "stacks")
    return tmp_path


def _edit(project: Path, name: str, old: str, new: str) -> Path:
    path = project / "stacks" / f"Pulumi.{name}.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(("old", "new", "fix"), [
    ('kubernetesVersion: "1.31.4"', "kubernetesVersion: 1.30",
     'gpuplane:cluster.kubernetesVersion: 1.30 is a YAML number, not a version; quote it: '
     '"1.30.<patch>" with the nodes\' patch release, e.g. "1.30.0" (a Kubernetes version is '
     'X.Y.Z) (unquoted, 1.30 reads as the number 1.3)'),
    ("chartVersion: v25.10.1", "chartVersion: 25.10",
     'gpuplane:gpuOperator.chartVersion: 25.10 is a YAML number, not a version; quote it: '
     'the exact chart release, e.g. "v25.10.1" (a chart version without its patch is a '
     'range, which FM18 refuses) (unquoted, 25.10 reads as the number 25.1)'),
    ('containerdVersion: "1.7.24"', "containerdVersion: 2.0",
     'gpuplane:cluster.containerdVersion: 2.0 is a YAML number, not a version; quote it: '
     '"2.0"\n'),
    ('containerdVersion: "1.7.24"', "containerdVersion: 1.7",
     'gpuplane:cluster.containerdVersion: 1.7 is a YAML number, not a version; quote it: '
     '"1.7"\n'),
])
def test_unquoted_version_fix_quotes_the_raw_text(capsys: pytest.CaptureFixture[str],
                                                  project: Path, old: str, new: str,
                                                  fix: str) -> None:
    """The fix quotes the text on the line, not the number YAML made of it (1.30 -> 1.3),
    and says "reads as" only where the number differs from the text."""
    _edit(project, "kubeadm-prod", old, new)
    code, _, err = plan(capsys, project / "stacks", "kubeadm-prod")
    assert code == 2
    assert fix in err + "\n", err


@pytest.mark.parametrize(("old", "applied"), [
    ('kubernetesVersion: "1.31.4"', 'kubernetesVersion: "1.31.0"'),
    ("chartVersion: v25.10.1", 'chartVersion: "v25.10.1"')])
def test_quoted_version_fix_applied_plans(capsys: pytest.CaptureFixture[str],
                                          project: Path, old: str, applied: str) -> None:
    """Applying the printed fix (the e.g. form) leads to a stack that plans clean."""
    _edit(project, "kubeadm-prod", old, applied)
    code, _, err = plan(capsys, project / "stacks", "kubeadm-prod")
    assert code == 0, err


PLAIN_KEY = ("  gpuplane:sshPrivateKey: |\n    -----BEGIN OPENSSH PRIVATE KEY-----\n"
             "    b3BlbnNzaC1rZXktdjEAAAAA\n    -----END OPENSSH PRIVATE KEY-----\n")


def test_plaintext_ssh_key_is_refused_naming_the_line(capsys: pytest.CaptureFixture[str],
                                                      project: Path) -> None:
    """A private key in clear in a committed stack file is refused (exit 2) at its line,
    with the command that encrypts it; the other problems of the file come with it."""
    path = project / "stacks" / "Pulumi.kubeadm-prod.yaml"
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("  gpuplane:sshPrivateKey:"))
    end = next(i for i in range(at + 1, len(lines)) if not lines[i].startswith("    "))
    text = "".join([*lines[:at], PLAIN_KEY, *lines[end:]])
    path.write_text(text.replace('kubernetesVersion: "1.31.4"', "kubernetesVersion: 1.31"))
    code, out, err = plan(capsys, project / "stacks", "kubeadm-prod")
    assert code == 2 and "Traceback" not in err
    assert (f"Pulumi.kubeadm-prod.yaml:{at + 1}: gpuplane:sshPrivateKey: a secret in plain "
            "text in the stack file") in err, err
    assert "pulumi config set --secret gpuplane:sshPrivateKey < ~/.ssh/id_ed25519" in err
    assert "gpuplane:cluster.kubernetesVersion: 1.31 is a YAML number" in err
    assert "BEGIN OPENSSH" not in out + err


def test_encrypted_ssh_key_is_accepted(capsys: pytest.CaptureFixture[str],
                                       project: Path) -> None:
    code, _, err = plan(capsys, project / "stacks", "kubeadm-prod")
    assert code == 0, err
    assert "plain text" not in err


@pytest.mark.parametrize(("old", "new", "says"), [
    ("    distro: kubeadm", "    distor: kubeadm",
     "gpuplane:cluster.distor: unknown key (did you mean `distro`?); known keys here: "
     "distro, kubernetesVersion,"),
    ("    canary: true", "    canery: true",
     "gpuplane:rollout.canery: unknown key (did you mean `canary`?); known keys here: "),
    ("{name: a100-01, host: 10.20.0.11, gpus: 8,", "{name: a100-01, host: 10.20.0.11, gpu: 8,",
     "gpuplane:nodes[0].gpu: unknown key (did you mean `gpus`?); known keys here: name, "),
])
def test_nested_unknown_key_lists_its_section_and_the_closest(
        capsys: pytest.CaptureFixture[str], project: Path, old: str, new: str,
        says: str) -> None:
    _edit(project, "kubeadm-prod", old, new)
    code, _, err = plan(capsys, project / "stacks", "kubeadm-prod")
    assert code == 2 and says in err, err


@pytest.mark.parametrize(("typo", "guess"), [("FM7", "FM07"), ("fm7", "FM07"),
                                             ("FM177", "FM17")])
def test_rules_typo_guesses_and_cites_pages_that_exist(
        capsys: pytest.CaptureFixture[str], project: Path, typo: str, guess: str) -> None:
    _edit(project, "kubeadm-prod", "  gpuplane:rollout:",
          f"  gpuplane:rules: {{{typo}: advisory}}\n  gpuplane:rollout:")
    code, _, err = plan(capsys, project / "stacks", "kubeadm-prod")
    assert code == 2 and f"gpuplane:rules.{typo}: no rule '{typo}'; did you mean {guess}?" \
        in err, err
    assert "docs/failure-modes.md" not in err
    for page in (p for p in err.split() if p.startswith("docs/")):
        assert (ROOT / page.rstrip(").,;")).exists(), page


def test_yaml_tab_says_tab(capsys: pytest.CaptureFixture[str], project: Path) -> None:
    _edit(project, "kubeadm-prod", "    distro: kubeadm", "\tdistro: kubeadm")
    code, _, err = plan(capsys, project / "stacks", "kubeadm-prod")
    assert code == 2 and "Pulumi.kubeadm-prod.yaml:6:1: not valid YAML: a tab character; " \
        "YAML indents with spaces only" in err, err


def test_unclosed_brace_names_the_line_that_opens_it(capsys: pytest.CaptureFixture[str],
                                                     project: Path) -> None:
    path = _edit(project, "kubeadm-prod", "os: ubuntu22.04, pool: a100}",
                 "os: ubuntu22.04, pool: a100")
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1)
                if text.endswith("pool: a100"))
    code, _, err = plan(capsys, project / "stacks", "kubeadm-prod")
    assert code == 2 and f"Pulumi.kubeadm-prod.yaml:{line}:7: not valid YAML: the `{{` " \
        "opened here is not closed" in err, err
