"""`infra diff`: what a change would do to a stack, as Markdown for a pull-request comment.

Two forms:
  infra diff OLD.json NEW.json          compare two saved plans
  infra diff STACK [--base REF]         plan the working tree and REF (default origin/main) and compare

The base plan is computed by running the base revision's own code in a temporary checkout (`git
worktree`), so a change to the toolkit itself shows up in the diff too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from infra.commands.files import os_error_line
from infra.config import stack_name_problem
from infra.errors import Problem, UserError
from infra.offline import build_plan
from infra.plandiff import diff_plans, render_markdown, validate_plan
from infra.project import project_root


def register(subparsers) -> None:
    p = subparsers.add_parser("diff", help="Markdown diff of offline plans (two JSON files, or a stack vs a git ref)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", help="OLD.json, or a stack name")
    p.add_argument("b", nargs="?", help="NEW.json (when comparing two files)")
    p.add_argument("--base", default="origin/main", help="git ref to compare the working tree against (default origin/main)")
    p.add_argument("--root", type=Path, default=None, help="project root (default: the project around the current directory)")
    p.add_argument("--fail-on-replace", action="store_true", help="exit 3 when a stateful or protected resource would be replaced or deleted")
    p.set_defaults(func=run)


def _load(path: str) -> dict:
    """A plan file written by `infra plan --json`, validated: a clear error naming the file otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise UserError(f"{path}: cannot read: {os_error_line(err, path)}") from None
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not a plan JSON file: not UTF-8 text ({err.reason} at byte {err.start})") from None
    try:
        data = json.loads(text)
    except ValueError as err:  # JSONDecodeError, or a number too large to convert
        raise UserError(f"{path}: not a plan JSON file: {err}; write plans with `infra plan STACK --json FILE`") from None
    return validate_plan(data, path)


def plan_at_ref(stack: str, ref: str, root: Path | None = None) -> dict:
    """The plan of `stack` as the code and stack file at git `ref` produce it (empty if absent there)."""
    root = project_root(root)
    check = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        raise UserError(f"--base {ref!r}: not a commit in {root} (fetch it first, e.g. `git fetch origin main`)")
    tmp = Path(tempfile.mkdtemp(prefix="infra-diff-"))
    worktree = tmp / "base"
    try:
        subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", "--quiet", str(worktree), ref],
                       check=True, capture_output=True, text=True)
        if not (worktree / "stacks" / f"Pulumi.{stack}.yaml").is_file() or not (worktree / "infra" / "cli.py").is_file():
            return {"stack": stack, "project": "inference-platform", "resources": [], "models": [], "cost": {}}
        out = tmp / "plan.json"
        env = dict(os.environ, PYTHONPATH=str(worktree))
        # Chart archives are never committed: the base plan templates from this checkout's charts/.
        env.setdefault("INFRA_CHART_DIR", str(root / "charts"))
        proc = subprocess.run([sys.executable, "-m", "infra.cli", "plan", stack, "--json", str(out), "--quiet"],
                              cwd=worktree, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise UserError(f"planning {stack} at {ref} failed: {proc.stderr.strip() or proc.stdout.strip()}")
        return validate_plan(json.loads(out.read_text()), f"plan of {stack} at {ref}")
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(worktree)], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def stacks_differ(old: dict, new: dict) -> str | None:
    """Two plans of different stacks compare every resource name as a replacement: say so."""
    a, b = old.get("stack"), new.get("stack")
    if a and b and a != b:
        return (
            f"comparing plans of different stacks ({a} → {b}): every resource is named after its stack, so the "
            "diff shows each one as deleted and created; compare two plans of one stack to review a change"
        )
    return None


def run(args) -> int:
    if args.b is not None:
        old, new = _load(args.a), _load(args.b)
    else:
        if args.a.endswith(".json"):
            raise UserError([Problem("NEW.json", f"missing: give two plan files (infra diff {args.a} NEW.json) or one stack name")])
        problem = stack_name_problem(args.a)
        if problem:
            raise UserError([Problem("STACK", problem)])
        old = plan_at_ref(args.a, args.base, args.root)
        new = build_plan(args.a, args.root).to_dict()
    warning = stacks_differ(old, new)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    diff = diff_plans(old, new)
    if warning:
        print(f"> **Warning:** {warning}\n")
    print(render_markdown(diff), end="")
    if args.fail_on_replace and diff.dangerous():
        return 3
    return 0
