"""Every stack and variant meets a real control plane (issue 36): its objects applied in
`pulumi up` order to a cluster whose nodes are shaped like its pools, then what the API server,
the controllers and the scheduler made of them.

Per stack: every object accepted (admission, schema, webhooks); every workload's pods created
and none Pending; each engine on its model's pool, each DaemonSet on exactly the pools it is
for, everything else on the system pool; the GPUs the scheduler handed out equal to the plan's;
a second apply changes nothing; and no object is started before a prerequisite it does not
declare (Pulumi starts it in parallel with that prerequisite)."""

from __future__ import annotations

import pytest

from tests.cluster import expect
from tests.cluster.apply import undeclared_prerequisites
from tests.cluster.stacks import NAMES, plan_named


@pytest.fixture(scope="module", params=NAMES)
def stack(request, cluster, tmp_path_factory):
    plan = plan_named(request.param, tmp_path_factory.mktemp("plans"))
    run = cluster.run_stack(request.param, plan.resources)
    yield plan, run
    cluster.reset(run)


def test_every_object_is_accepted(stack):
    _, run = stack
    assert not run.outcome.rejected, "rejected by the API server:\n" + "\n".join(run.outcome.rejected)


def test_every_pod_is_created_and_scheduled(stack):
    _, run = stack
    assert not run.not_created, "workloads short of pods:\n" + "\n".join(run.not_created)
    pending = [f"{p.namespace}/{p.name}: {p.pending_reason}" for p in run.pending]
    assert not pending, f"{len(pending)} pods Pending:\n" + "\n".join(pending)


def test_engines_run_on_their_models_pool(stack):
    plan, run = stack
    pools = expect.model_pools(plan)
    wrong = [f"{p.namespace}/{p.name} ({p.labels['inference-platform/model']}) on {p.pool}, not {pools.get(p.labels['inference-platform/model'])}"
             for p in run.pods if p.gpus and p.node and p.pool != pools.get(p.labels.get("inference-platform/model", ""))]  # fmt: skip
    assert not wrong, "\n".join(wrong)


def test_daemonsets_run_on_exactly_their_pools(stack):
    _, run = stack
    by_ds: dict[str, set[str]] = {}
    for p in run.pods:
        if p.owner[0] == "DaemonSet":
            by_ds.setdefault(p.owner[1], set()).add(p.pool)
    problems = []
    for name, landed in sorted(by_ds.items()):
        meant = expect.daemonset_pools(name, run.pools)
        if meant is None:
            problems.append(f"DaemonSet {name}: not known to tests/cluster/expect.py (say which pools it is for)")
        elif landed != meant:
            problems.append(f"DaemonSet {name}: on pools {sorted(landed)}, meant for {sorted(meant)}")
    assert not problems, "\n".join(problems)


def test_everything_else_runs_on_the_system_pool(stack):
    _, run = stack
    system = next(p.name for p in run.pools if p.system)
    wrong = [f"{p.namespace}/{p.name} ({p.owner[0]} {p.owner[1]}) on {p.pool}"
             for p in run.pods if p.node and not p.gpus and p.owner[0] != "DaemonSet" and p.pool != system]  # fmt: skip
    assert not wrong, f"not on the system pool {system}:\n" + "\n".join(wrong)


def test_the_scheduler_hands_out_the_gpus_the_plan_counts(stack):
    plan, run = stack
    want = expect.plan_gpus(plan)
    got: dict[str, int] = {}
    for p in run.pods:
        if p.gpus and p.node:
            model = p.labels.get("inference-platform/model", f"(no model label: {p.name})")
            got[model] = got.get(model, 0) + p.gpus
    assert got == want


def test_a_second_apply_changes_nothing(stack, cluster):
    """An identical apply must change neither an object's content nor stamp the apply's
    managedFields entry anew: either is what `pulumi up` would show as a diff forever."""
    plan, run = stack
    before = cluster.snapshots(run)
    again = cluster.reapply(plan.resources)
    assert not again.rejected, "\n".join(again.rejected)
    after = cluster.snapshots(run)
    changed = sorted(f"{k[1]} {k[2]}/{k[3]}" for k in before if before[k]["content"] != after[k]["content"])
    assert not changed, "changed by an identical apply:\n" + "\n".join(changed)


def test_no_object_starts_before_an_undeclared_prerequisite(stack):
    plan, _ = stack
    problems = undeclared_prerequisites(plan.resources)
    assert not problems, "\n".join(problems)
