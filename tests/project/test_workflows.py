"""The GitHub workflows: linted by actionlint and zizmor, and held to the project's CI contract.

actionlint checks syntax, expressions, action inputs and (with shellcheck on PATH) the `run:`
scripts; zizmor checks security (template injection, credential persistence, permissions,
unpinned actions). Both run offline. The structural tests pin down what the linters cannot know:
which commands run, which environments gate which stacks, how the stack list is built.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT as TESTS_ROOT
from tests.conftest import make_project

ROOT = TESTS_ROOT
WORKFLOWS = ROOT / ".github" / "workflows"
WORKFLOW_FILES = sorted(WORKFLOWS.glob("*.yml"))
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")


def _tool(name: str) -> str:
    """A linter from the test extras: on PATH, or next to this interpreter (an unactivated venv)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not found:
        pytest.fail(f"`{name}` is not installed; install the test extras (pip install -e '.[test]')")
    return found


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "NO_COLOR": "1", "HOME": str(cwd)}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


def _load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as boolean true
    return data


def _steps(workflow: dict):
    for job_name, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield job_name, step


# ------------------------------------------------------------------------------------ linters


def test_workflows_exist():
    assert {p.name for p in WORKFLOW_FILES} >= {"ci.yml", "plan-diff.yml", "preview.yml", "deploy.yml"}


@pytest.mark.actionlint
def test_actionlint_is_clean():
    result = _run([_tool("actionlint"), "-no-color", *[str(p) for p in WORKFLOW_FILES]], ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.actionlint
def test_zizmor_is_clean():
    result = _run([_tool("zizmor"), "--offline", "--no-progress", str(WORKFLOWS)], ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.actionlint
def test_linters_do_catch_a_bad_workflow(tmp_path):
    """The two tests above can fail: an injectable, unpinned, mistyped workflow is rejected."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "on: pull_request\n"
        "jobs:\n"
        "  greet:\n"
        "    runs-on: ubuntu-24.04\n"
        "    steps:\n"
        "      - uses: actions/checkout@v5\n"
        '      - run: echo "${{ github.event.pull_request.title }}"\n'
        "      - run: echo ${{ github.event.nonexistent_fn() }}\n"
    )
    assert _run([_tool("actionlint"), "-no-color", str(bad)], tmp_path).returncode != 0
    zizmor = _run([_tool("zizmor"), "--offline", "--no-progress", str(bad.parent)], tmp_path)
    assert zizmor.returncode != 0 and "template-injection" in zizmor.stdout


# ------------------------------------------------------------------------------------ hygiene


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_actions_are_pinned_by_sha_with_a_version_comment(path):
    text = path.read_text()
    for job_name, step in _steps(_load(path)):
        uses = step.get("uses")
        if uses is None:
            continue
        assert PINNED.match(uses), f"{path.name}/{job_name}: {uses} is not pinned to a full commit SHA"
        assert re.search(re.escape(uses) + r" # v\d+\.\d+\.\d+", text), f"{uses} lacks a `# vX.Y.Z` comment"


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_least_privilege(path):
    workflow = _load(path)
    assert workflow["permissions"] == {}, "grant nothing at workflow level; each job asks for what it needs"
    for job_name, job in workflow["jobs"].items():
        perms = job.get("permissions")
        assert isinstance(perms, dict), f"{job_name} must declare its permissions"
        writes = {k for k, v in perms.items() if v == "write"}
        assert writes <= {"pull-requests"}, f"{job_name} writes {writes}"
        for _, step in _steps({"jobs": {job_name: job}}):
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


def test_pull_request_code_never_runs_with_write_access():
    """In plan-diff, the job that runs `infra diff` reads; the job that comments runs no repo code."""
    jobs = _load(WORKFLOWS / "plan-diff.yml")["jobs"]
    assert jobs["diff"]["permissions"] == {"contents": "read"}
    comment = jobs["comment"]
    assert comment["permissions"] == {"pull-requests": "write"}
    assert all("run" not in step for step in comment["steps"])
    assert not any("checkout" in str(step.get("uses")) for step in comment["steps"])
    assert "head.repo.full_name == github.repository" in comment["if"]


# ------------------------------------------------------------------------------------ behaviour


def test_ci_runs_the_readme_test_command():
    steps = [s for _, s in _steps(_load(WORKFLOWS / "ci.yml"))]
    assert any(s.get("run", "").strip() == "./dev.sh test" for s in steps)
    # deploy.yml tests the pushed commit the same way before anything is deployed
    deploy_test = _load(WORKFLOWS / "deploy.yml")["jobs"]["test"]
    assert deploy_test["steps"] == _load(WORKFLOWS / "ci.yml")["jobs"]["test"]["steps"]
    assert "./dev.sh test" in (ROOT / ".ci" / "run").read_text()
    readme = ROOT / "README.md"
    if readme.exists():
        assert "./dev.sh test" in readme.read_text(), "README's test command and CI's must agree"


def test_the_floors_check_runs_test_paths_that_exist():
    """scripts/check_floors.sh runs a subset of the suite on the lowest allowed dependencies; a test
    reorganisation once left it naming files that no longer existed, and CI failed only at its end."""
    script = (ROOT / "scripts" / "check_floors.sh").read_text()
    lists = re.findall(r"^\s*tests=\(([^)]*)\)", script, flags=re.MULTILINE)
    assert lists, "check_floors.sh no longer sets tests=(...)"
    for entry in (word for words in lists for word in words.split()):
        assert list(ROOT.glob(entry)), f"check_floors.sh runs {entry}, which matches no file"


def test_ci_cancels_superseded_runs_only_for_pull_requests():
    concurrency = _load(WORKFLOWS / "ci.yml")["concurrency"]
    assert concurrency["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"


def test_plan_diff_runs_infra_diff_against_the_base_branch_per_stack():
    workflow = _load(WORKFLOWS / "plan-diff.yml")
    assert set(workflow["on"]) == {"pull_request"}
    diff = workflow["jobs"]["diff"]
    assert diff["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.stacks.outputs.stacks) }}"
    assert "${{ matrix.stack }}" in diff["concurrency"]["group"]
    checkout = diff["steps"][0]
    assert checkout["with"]["fetch-depth"] == 0
    step = next(s for s in diff["steps"] if "infra diff" in s.get("run", ""))
    assert './dev.sh infra diff "$STACK" --base "origin/${BASE_REF}"' in step["run"]
    assert step["env"] == {"STACK": "${{ matrix.stack }}", "BASE_REF": "${{ github.base_ref }}"}
    script = workflow["jobs"]["comment"]["steps"][-1]["with"]["script"]
    assert "<!-- infra-plan-diff:${stack} -->" in script and "updateComment" in script


def _list_step(workflow: str) -> dict:
    return next(s for _, s in _steps(_load(WORKFLOWS / workflow)) if s.get("id") == "list")


def _run_list_step(step: dict, cwd: Path, env: dict | None = None) -> list[str]:
    """Run the shell snippet that feeds a matrix and return the stacks it outputs."""
    output = cwd / "github_output"
    result = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", step["run"]],
        cwd=cwd,
        env={"GITHUB_OUTPUT": str(output), "PATH": "/usr/bin:/bin", **(env or {})},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    key, _, value = output.read_text().strip().partition("=")
    assert key == "stacks"
    return json.loads(value)


def _git(cwd: Path, *args: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    for who in ("AUTHOR", "COMMITTER"):
        env |= {f"GIT_{who}_NAME": "t", f"GIT_{who}_EMAIL": "t@example.com"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def test_preview_stack_list_is_every_stack_file(tmp_path):
    """preview.yml previews the stacks of the pull request (a deleted stack cannot be previewed)."""
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for name in ("prod", "dev", "sandbox-jane", "staging"):
        (stacks / f"Pulumi.{name}.yaml").write_text("config: {}\n")
    (stacks / "README.md").write_text("not a stack\n")
    assert _run_list_step(_list_step("preview.yml"), tmp_path) == ["dev", "prod", "sandbox-jane", "staging"]


def test_plan_diff_stack_list_is_the_union_of_base_and_head(tmp_path):
    """plan-diff.yml lists the base branch's stacks too, so a stack removed by the pull request
    still gets its comment updated (to say it is removed)."""
    step = _list_step("plan-diff.yml")
    assert step["env"] == {"BASE_REF": "${{ github.base_ref }}"}
    assert _load(WORKFLOWS / "plan-diff.yml")["jobs"]["stacks"]["steps"][0]["with"]["fetch-depth"] == 0
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for name in ("prod", "dev", "old-sandbox", "staging"):
        (stacks / f"Pulumi.{name}.yaml").write_text("config: {}\n")
    (stacks / "README.md").write_text("not a stack\n")
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "add", "stacks")
    _git(tmp_path, "commit", "-q", "-m", "base")
    _git(tmp_path, "update-ref", "refs/remotes/origin/main", "HEAD")
    # The pull request (the checked-out tree) removes one stack and adds another.
    (stacks / "Pulumi.old-sandbox.yaml").unlink()
    (stacks / "Pulumi.sandbox-jane.yaml").write_text("config: {}\n")
    found = _run_list_step(step, tmp_path, {"BASE_REF": "main"})
    assert found == ["dev", "old-sandbox", "prod", "sandbox-jane", "staging"]
    # A base branch that cannot be read fails the job instead of silently listing fewer stacks.
    output = tmp_path / "github_output"
    result = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", step["run"]],
        cwd=tmp_path,
        env={"GITHUB_OUTPUT": str(output), "PATH": "/usr/bin:/bin", "BASE_REF": "no-such-branch"},
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert step["shell"] == "bash"  # GitHub's explicit bash runs with -o pipefail


def test_plan_diff_comments_on_a_removed_stack_without_planning_it(tmp_path):
    diff = _load(WORKFLOWS / "plan-diff.yml")["jobs"]["diff"]
    step = next(s for s in diff["steps"] if "infra diff" in s.get("run", ""))
    make_project(tmp_path)  # no stacks/Pulumi.old-sandbox.yaml: removed by the pull request
    summary = tmp_path / "summary.md"
    result = subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        cwd=tmp_path,
        env={
            "PATH": "/usr/bin:/bin",
            "STACK": "old-sandbox",
            "BASE_REF": "main",
            "GITHUB_STEP_SUMMARY": str(summary),
        },
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    body = (tmp_path / "out" / "diff.md").read_text()
    assert "removes stack `old-sandbox`" in body and "pulumi destroy --stack old-sandbox" in body
    assert summary.read_text() == body


def test_plan_diff_comment_tolerates_a_missing_artifact_without_hiding_failures():
    jobs = _load(WORKFLOWS / "plan-diff.yml")["jobs"]
    upload = next(s for s in jobs["diff"]["steps"] if "upload-artifact" in str(s.get("uses")))
    assert upload["with"]["if-no-files-found"] == "error"
    download, post = jobs["comment"]["steps"]
    assert "download-artifact" in download["uses"] and download["continue-on-error"] is True
    assert post["env"]["DOWNLOAD_OUTCOME"] == "${{ steps.download.outcome }}"
    script = post["with"]["script"]
    assert "fs.existsSync('out/diff.md')" in script and "No plan diff for this push" in script
    assert "needs.stacks.result == 'success'" in jobs["comment"]["if"]


def test_preview_needs_approval_and_never_runs_for_forks():
    """The credentialed preview runs pull-request code: in the `preview` environment (whose
    required reviewers approve each run) and only for pull requests from this repository."""
    job = _load(WORKFLOWS / "preview.yml")["jobs"]["preview"]
    assert job.get("environment") == "preview", "the credentialed preview must run in its environment"
    condition = re.sub(r"\s+", " ", job.get("if", ""))
    assert condition == "${{ github.event.pull_request.head.repo.full_name == github.repository }}"
    assert set(job["permissions"]) <= {"contents", "pull-requests"}
    docs = re.sub(r"\s+", " ", (ROOT / "docs" / "ci.md").read_text())
    assert "`preview` environment must have required reviewers" in docs


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_jobs_with_secrets_run_in_an_environment(path):
    """Repository secrets would reach any job; credentials live in environments, and a pull
    request's job gets them only for same-repository pull requests."""
    workflow = _load(path)
    for job_name, job in workflow["jobs"].items():
        if "secrets." not in yaml.safe_dump(job).replace("secrets.GITHUB_TOKEN", ""):
            continue
        assert job.get("environment"), f"{path.name}/{job_name} uses secrets outside an environment"
        if "pull_request" in workflow["on"] or "pull_request_target" in workflow["on"]:
            assert "head.repo.full_name == github.repository" in job.get("if", ""), job_name


def test_preview_uses_pulumi_actions_with_diff_comment_and_policy_pack():
    workflow = _load(WORKFLOWS / "preview.yml")
    job = workflow["jobs"]["preview"]
    assert job["environment"] == "preview"
    assert "${{ matrix.stack }}" in job["concurrency"]["group"]
    pulumi = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("pulumi/actions@"))
    assert pulumi["with"]["command"] == "preview"
    assert pulumi["with"]["stack-name"] == "${{ matrix.stack }}"
    assert pulumi["with"]["comment-on-pr"] is True and pulumi["with"]["diff"] is True
    assert pulumi["with"]["policyPacks"] == "policy"
    assert (ROOT / pulumi["with"]["policyPackConfigs"]).is_file()
    # Every step after the credential probe is skipped when the token is missing.
    probe, *rest = job["steps"]
    assert probe["id"] == "creds"
    assert all(s.get("if") == "steps.creds.outputs.available == 'true'" for s in rest)


def test_policy_pack_config_names_real_policies():
    from policy import rules

    config = json.loads((ROOT / "policy" / "config.json").read_text())
    assert set(config) <= {r.name for r in rules.RULES}


def test_deploy_gates_staging_and_prod_behind_environments():
    workflow = _load(WORKFLOWS / "deploy.yml")
    assert workflow["on"] == {"push": {"branches": ["main"]}}
    jobs = workflow["jobs"]
    assert [jobs[s]["environment"] for s in ("dev", "staging", "prod")] == ["dev", "staging", "prod"]
    # Nothing deploys before the pushed commit's tests pass.
    assert jobs["dev"]["needs"] == "test" and "environment" not in jobs["test"]
    assert any(s.get("run", "").strip() == "./dev.sh test" for s in jobs["test"]["steps"])
    assert jobs["staging"]["needs"] == "dev" and jobs["prod"]["needs"] == "staging"
    for stack in ("dev", "staging", "prod"):
        job = jobs[stack]
        assert job["concurrency"] == {"group": f"pulumi-up-{stack}", "cancel-in-progress": False}
        up = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("pulumi/actions@"))
        assert up["with"]["command"] == "up" and up["with"]["stack-name"] == stack
        assert up["with"]["policyPacks"] == "policy"
