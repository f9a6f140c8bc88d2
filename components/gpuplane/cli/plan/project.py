"""The Pulumi project `gpuplane plan` plans: `Pulumi.yaml`'s program, as `pulumi preview`
runs it (its `main`, else the project directory's `__main__.py`), with its stack files
where `stackConfigDir` says. gpuplane's own repository is one such project.

The program runs in this process under the mock engine: its directory first on
`sys.path` and as the working directory, `__name__ == "__main__"`, as the Python language
host runs it. A program that fails is reported as its own error (`ProgramFailed`), never
replaced by a plan of something else.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PROJECT_FILE = "Pulumi.yaml"


class ProjectError(Exception):
    """The project cannot be planned: no Pulumi.yaml, not a Python project, no program."""


class ProgramFailed(Exception):
    """The project's program raised: the message names where, in the program's own words."""


@dataclass(frozen=True)
class Project:
    name: str          # Pulumi.yaml `name`: the namespace of `pulumi.Config()`
    root: Path         # the directory of Pulumi.yaml
    program: Path      # the directory or file the language host runs
    stacks_dir: Path   # `stackConfigDir`, else the project root
    # `runtime.options.virtualenv`: where `pulumi up` finds the program's packages; the
    # plan runs the program with gpuplane's own Python (program_failure says so).
    virtualenv: Path | None = None

    @property
    def main_file(self) -> Path:
        return self.program / "__main__.py" if self.program.is_dir() else self.program

    @property
    def pwd(self) -> Path:
        """The working directory Pulumi gives the program and its providers (the program's
        directory; pulumi/pulumi pkg/engine/project.go@v3.260.0 `getPwdMain`): where a
        relative local chart path is found."""
        return self.program if self.program.is_dir() else self.program.parent

    def runner(self) -> Callable[[], Any]:
        """The program as a callable for the mock engine."""
        return lambda: run_main(self.program)


def find_project(start: Path) -> Path | None:
    """The directory of the Pulumi.yaml at or above `start` (as `pulumi` searches)."""
    here = start.resolve()
    for folder in (here, *here.parents):
        if (folder / PROJECT_FILE).is_file():
            return folder
    return None


def load_project(folder: Path) -> Project:
    """`folder`'s Pulumi.yaml, checked: a Python runtime and a program that exists."""
    path = folder / PROJECT_FILE
    if not path.is_file():
        raise ProjectError(f"{path}: no such file; fix: run `gpuplane plan` in a Pulumi "
                           "project, or name one with --project DIR")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ProjectError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise ProjectError(f"{path}: expected a mapping (name, runtime, ...)")
    runtime = data.get("runtime")
    runtime_name = runtime.get("name") if isinstance(runtime, dict) else runtime
    if runtime_name != "python":
        raise ProjectError(
            f"{path}: runtime is {runtime_name!r}: `gpuplane plan` runs Python programs "
            "(gpuplane's components are Python); fix: `runtime: python`")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ProjectError(f"{path}: `name` is missing; fix: name the project")
    root = folder.resolve()
    main = data.get("main")
    program = (root / str(main)).resolve() if main else root
    target = program / "__main__.py" if program.is_dir() else program
    if not target.is_file():
        where = f"`main: {main}`" if main else "the project directory"
        raise ProjectError(f"{path}: {where} has no program ({target} does not exist); fix: "
                           "write the program there, or point `main` at it")
    stacks = data.get("stackConfigDir")
    options = runtime.get("options") if isinstance(runtime, dict) else None
    venv = options.get("virtualenv") if isinstance(options, dict) else None
    return Project(name=name, root=root, program=program,
                   stacks_dir=(root / str(stacks)) if stacks else root,
                   virtualenv=(root / str(venv)).resolve() if venv else None)


BUNDLED = "gpuplane"


def project_at(folder: Path) -> Project | None:
    """`load_project(folder)`, or None for gpuplane's own project laid out without its
    `__main__.py` (a Pulumi.yaml named `gpuplane` and no program: a copy of the bundled
    project's stacks and captured files), whose program is gpuplane's bundled one."""
    path = folder / PROJECT_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        data = None
    if isinstance(data, dict) and data.get("name") == BUNDLED and not data.get("main") \
            and not (folder / "__main__.py").is_file():
        return None
    return load_project(folder)


def run_main(program: Path) -> None:
    """Run the program as the language host does; its exceptions propagate."""
    folder = program if program.is_dir() else program.parent
    with _in_program_dir(folder):
        runpy.run_path(str(program), run_name="__main__")


@contextmanager
def in_dir(folder: Path | None) -> Iterator[None]:
    """Run in `folder` (None: where we are), as the engine runs the pack beside the
    program: relative paths the program's resources name resolve as they do there."""
    if folder is None:
        yield
        return
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@contextmanager
def _in_program_dir(folder: Path) -> Iterator[None]:
    before, path = Path.cwd(), list(sys.path)
    sys.path.insert(0, str(folder))
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)
        sys.path[:] = path


def program_failure(exc: BaseException, project: Project) -> ProgramFailed:
    """The program's error in its own words: `pulumi.RunError`'s message alone (as the
    CLI prints it), anything else with the program's last line that raised it."""
    import pulumi

    if isinstance(exc, pulumi.RunError):
        return ProgramFailed(f"{project.main_file}: the program failed: {exc}")
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if Path(f.filename).resolve().is_relative_to(project.root)]
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else str(project.main_file)
    return ProgramFailed(f"{where}: the program failed: {type(exc).__name__}: {exc}"
                         + (_import_hint(project) if isinstance(exc, ImportError) else ""))


def _import_hint(project: Project) -> str:
    """Why a package `pulumi up` finds can be missing here: the plan runs the program
    in gpuplane's own Python, not in the virtualenv Pulumi.yaml names."""
    here = Path(sys.prefix).resolve()
    if project.virtualenv is not None and project.virtualenv != here:
        venv = project.virtualenv
        return (f"; gpuplane runs the program with its own Python ({sys.executable}), not "
                f"the virtualenv Pulumi.yaml names ({venv}); fix: install gpuplane into that "
                f"virtualenv and run it from there (`{venv}/bin/pip install <gpuplane wheel>`"
                f", then `{venv}/bin/gpuplane plan`)")
    return (f"; gpuplane runs the program with its own Python ({sys.executable}): the "
            "program's packages must be installed there")


__all__ = ["PROJECT_FILE", "ProgramFailed", "Project", "ProjectError", "find_project",
           "load_project", "program_failure", "project_at", "run_main"]
