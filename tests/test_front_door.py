"""The front door: one endpoint per environment in the plan, and `infra diff` flags its changes."""

from __future__ import annotations

import copy

from infra.front_door import endpoint_changes
from infra.offline import build_plan
from infra.plandiff import diff_plans, render_markdown
from infra.render.router import render_router
from tests.conftest import plan_of


def _stack_plan(stack: str):
    from infra.config import load_stack_file
    from infra.stack_plan import plan_stack
    from tests.conftest import ROOT

    return plan_stack(load_stack_file(stack, ROOT))


def test_prod_has_one_router_and_one_endpoint_for_both_models():
    plan = _stack_plan("prod")
    door = plan.front_door
    assert door.kind == "session" and door.urls == ("http://router.inference.svc.cluster.local/v1",)
    assert door.models == tuple(sorted(s.served_model_name for s in plan.services)) and len(door.models) == 2
    assert "consistent_hash" in door.routing and door.why
    deployments = [o for o in render_router(plan.router) if o["kind"] == "Deployment"]
    assert len(deployments) == 1
    args = next(c for c in deployments[0]["spec"]["template"]["spec"]["containers"] if c["name"] == "registrar")["args"]
    assert sorted(args[i + 1].split("=", 1)[0] for i, a in enumerate(args) if a == "--model") == list(door.models)
    resources = plan_of("prod").resources
    assert [r["name"] for r in resources if r["type"] == "kubernetes:apps/v1:Deployment" and "router" in r["name"]] == [
        "prod-router-deployment"
    ]


def test_kind_service_lists_one_url_per_model():
    plan = _stack_plan("dev")
    door = plan.front_door
    assert door.kind == "service" and door.public_url is None
    assert all(u.endswith(":8000/v1") for u in door.urls) and len(door.urls) == len(plan.services)


def test_plan_json_and_text_show_the_front_door():
    plan = build_plan("prod")
    assert plan.to_dict()["front_door"]["urls"] == ["http://router.inference.svc.cluster.local/v1"]
    from infra.commands.plan import render_summary

    assert "Front door:" in render_summary(plan, terminal=False)


def test_diff_flags_a_router_kind_change_as_an_endpoint_change():
    old = build_plan("prod").to_dict()
    new = copy.deepcopy(old)
    new["front_door"].update(kind="round-robin", routing="vllm-router round_robin, by the request's model")
    diff = diff_plans(old, new)
    assert [f for f, _, _ in diff.endpoint_changes] == ["kind", "routing"]
    text = render_markdown(diff)
    assert "Endpoint change" in text and "Front door" in text
    assert diff_plans(old, copy.deepcopy(old)).empty
    assert endpoint_changes({}, {"kind": "session", "urls": ["u"]})[0] == ("kind", None, "session")
