"""The invariants and Kubernetes agree (issue 36): a sample of the stacks the property-based
generator of tests/test_fuzz_stacks.py makes, those the whole plan accepts (config, planner and
every invariant: `offline_plan`), is applied to the control plane too: none of their objects may be
rejected and none of their pods left Pending. A disagreement is a plan `infra plan` accepts and
`pulumi up` could not finish: it becomes an offline invariant (infra/invariants/) with a test.

The sample is derandomized (the same stacks on every run), SAMPLE stacks drawn in order from the
generator's stream; INFRA_CLUSTER_FUZZ=N takes another size."""

from __future__ import annotations

import copy
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.config import load_config
from infra.errors import ConfigError, UserError
from infra.offline import offline_plan
from infra.stack_plan import plan_stack
from tests.conftest import ROOT, STACKS
from tests.test_fuzz_stacks import BASES, _apply, mutations

SAMPLE = int(os.environ.get("INFRA_CLUSTER_FUZZ", "4"))


def accepted_sample(size: int) -> list[tuple[str, object]]:
    """(label, Plan) of the first `size` generated stacks the whole plan accepts."""
    found: list[tuple[str, object]] = []

    @settings(max_examples=400, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def collect(data):
        stack = data.draw(st.sampled_from(STACKS), label="stack")
        values, secret_keys = copy.deepcopy(BASES[stack][0]), set(BASES[stack][1])
        muts = data.draw(mutations(stack), label="mutations")  # drawn every time: hypothesis replays the stream
        if len(found) >= size or not any(m[0][0].endswith(("models", "gpu_pools")) for m in muts):
            return  # the sample is about layouts and pools: what placement depends on
        for mutation in muts:
            _apply(values, mutation)
        try:
            plan = offline_plan(plan_stack(load_config(values, stack=stack, secret_keys=secret_keys, base_dir=ROOT)), ROOT)
        except (ConfigError, UserError):
            return
        found.append((f"{stack}: " + "; ".join(f"{'.'.join(map(str, p[1:]))} {op} {a!r}"[:120] for p, op, a in muts), plan))

    collect()
    return found


@pytest.fixture(scope="module")
def sample():
    return accepted_sample(SAMPLE)


def test_the_sample_is_not_empty(sample):
    assert len(sample) == SAMPLE, f"only {len(sample)} of {SAMPLE} generated stacks were accepted by the plan"


@pytest.mark.parametrize("index", range(SAMPLE))
def test_a_stack_the_invariants_accept_is_accepted_and_scheduled(index, sample, cluster):
    if index >= len(sample):
        pytest.skip("sample short (test_the_sample_is_not_empty says so)")
    label, plan = sample[index]
    run = cluster.run_stack(f"fuzz-{index}", plan.resources, settle_timeout=90)
    try:
        pending = [f"{p.namespace}/{p.name}: {p.pending_reason}" for p in run.pending]
        assert not run.outcome.rejected and not run.not_created and not pending, (
            f"{label}\nrejected: {run.outcome.rejected}\nshort of pods: {run.not_created}\nPending: {pending}"
        )
    finally:
        cluster.reset(run)
