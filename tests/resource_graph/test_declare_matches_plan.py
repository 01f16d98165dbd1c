"""`declare` registers exactly what the plan records, resource by resource.

The plan file's records (infra/resource_graph/records.py) follow Pulumi's rules for what the engine
receives (dependencies on a group expanded to its members, input dependencies, secrets); here the
real `declare` runs the same StackPlan under Pulumi's mock runtime, and every registration —
type, name, parent, inputs on the wire, options — must equal its record. Any rule the records get
wrong, or any option `declare` drops, shows up as a difference.
"""

from __future__ import annotations

import pytest

from infra.config import PROJECT
from infra.declare import declare
from infra.mock_runtime import placeholder_secrets, run_program
from infra.offline import record_stack_plan
from tests.security_variants import NAMES, VARIANTS


def _plan_of(name: str, tmp_path):
    from infra.config import load_stack_file
    from infra.stack_plan import plan_stack
    from tests.conftest import ROOT

    if name in VARIANTS:
        import yaml

        from tests.conftest import make_project

        stack, mutate = VARIANTS[name]
        doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
        mutate(doc["config"])
        make_project(tmp_path)
        (tmp_path / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))
        return plan_stack(load_stack_file(stack, tmp_path))
    return plan_stack(load_stack_file(name, ROOT))


@pytest.mark.parametrize("name", NAMES)
def test_declare_registers_what_the_plan_records(name, tmp_path):
    plan = _plan_of(name, tmp_path)
    records, _ = record_stack_plan(plan)
    recording = run_program(lambda: declare(plan, placeholder_secrets(plan)), stack=plan.stack, project=PROJECT)
    registered = {(r.type, r.name): r.plan_record() for r in recording.registrations}
    planned = {(r["type"], r["name"]): r for r in records}
    assert sorted(registered) == sorted(planned)
    differing = {key: [f for f in planned[key] if planned[key][f] != registered[key][f]] for key in planned
                 if planned[key] != registered[key]}  # fmt: skip
    assert differing == {}
