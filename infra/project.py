"""Which project a command works on: found like Pulumi finds it, from where you stand.

Commands walk up from the current directory to the first `Pulumi.yaml` whose project name is
ours (`--root DIR` names the directory instead). Reading `stacks/` from the checkout the tool
was installed from would silently plan another clone's files when one editable install serves
several clones or worktrees.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from infra.errors import Problem, UserError

PROJECT = "inference-platform"
PROJECT_FILE = "Pulumi.yaml"


def _project_name(path: Path) -> str | None:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return doc.get("name") if isinstance(doc, dict) else None


def find_project_root(start: Path | None = None) -> Path:
    """The nearest directory at or above `start` (default: the cwd) holding our Pulumi.yaml."""
    here = (start or Path.cwd()).resolve()
    foreign = []
    for directory in (here, *here.parents):
        candidate = directory / PROJECT_FILE
        if candidate.is_file():
            name = _project_name(candidate)
            if name == PROJECT:
                return directory
            foreign.append(f"{candidate} (project {name!r})")
    seen = f"; found only {', '.join(foreign)}" if foreign else ""
    raise UserError(
        [
            Problem(
                "",
                f"no {PROJECT} project: looked for {PROJECT_FILE} with `name: {PROJECT}` in {here} and every "
                f"directory above it{seen}; run the command inside a checkout, or pass --root DIR",
            )
        ]
    )


def project_root(explicit: Path | None = None) -> Path:
    """`--root DIR` when given (it must hold our Pulumi.yaml), else the project around the cwd."""
    if explicit is None:
        return find_project_root()
    candidate = explicit / PROJECT_FILE
    if not candidate.is_file() or _project_name(candidate) != PROJECT:
        raise UserError([Problem(f"--root {explicit}", f"has no {PROJECT_FILE} of project {PROJECT!r}; give the project's root directory")])
    return explicit
