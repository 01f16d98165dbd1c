"""The real Pulumi program (`infra/__main__.py`) under mocks: it declares what the offline plan shows.

`pulumi up` runs `infra/__main__.py`, which reads the engine's config; `infra plan` calls
`plan_stack` and `declare` directly. Run here in a fresh interpreter with the stack file's values
handed over as the engine hands them (structured values as JSON, secrets as secrets), the entry
point must register exactly the resources of the offline plan, and refuse to run with a required
secret unset (the offline plan only lists it).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, plan_of

_RUN = r"""
import asyncio, json, runpy, sys
import pulumi
from pulumi.runtime import mocks, settings
from pulumi.runtime.stack import run_pulumi_func
from infra.config import PROJECT, read_stack_file, stack_file
from infra.mock_runtime import PlanMocks, RecordingMonitor
from pathlib import Path

root, stack, extra_secrets = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
values, secret_keys = read_stack_file(stack_file(stack, root))
config = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items() if k not in secret_keys}
secrets = sorted(secret_keys | {f"inference-platform:{k}" for k in extra_secrets})
config.update({k: "[secret]" for k in secrets})
asyncio.set_event_loop(asyncio.new_event_loop())
settings.reset_options()
pulumi.runtime.set_all_config(config, secrets)
monitor = RecordingMonitor(PlanMocks())
mocks.set_mocks(PlanMocks(), project=PROJECT, stack=stack, preview=False, monitor=monitor)
try:
    asyncio.get_event_loop().run_until_complete(
        run_pulumi_func(lambda: runpy.run_path(str(root / "infra" / "__main__.py"), run_name="__main__")))
except pulumi.RunError as err:
    print(json.dumps({"error": str(err)}))
    sys.exit(0)
records = sorted((r.plan_record() for r in monitor.registrations), key=lambda r: (r["type"], r["name"]))
print(json.dumps({"resources": records}))
"""


def _run(stack: str, *extra_secrets: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, str(ROOT), stack, *extra_secrets],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("stack", ["dev", "staging"])
def test_the_entry_point_declares_what_the_offline_plan_records(stack):
    extra = ["grafana_admin_password"] if stack == "staging" else []
    assert _run(stack, *extra)["resources"] == json.loads(plan_of(stack).to_json())["resources"]


def test_prod_with_placeholder_api_ranges_stops_a_real_run_with_one_line():
    """issue 30: the shipped prod allow-list is documentation ranges (nobody could reach the API):
    the plan lists it, a real run refuses it before declaring anything."""
    answer = _run("prod", "grafana_admin_password")
    assert "cluster.control_plane_allowed_cidrs" in answer["error"] and "documentation range" in answer["error"]
    assert any("to fix before `pulumi up`" in n for n in plan_of("prod").summary["notes"])


def test_a_missing_required_secret_stops_a_real_run_with_one_line():
    answer = _run("staging")  # observability on, grafana_admin_password unset
    assert answer["error"].startswith("missing secrets: inference-platform:grafana_admin_password")
    assert plan_of("staging").summary["secrets_to_set"] == ["grafana_admin_password"]  # the plan only lists it
