"""Issue 29, property: stacks across the serving surface plan cleanly or are refused cleanly.

Hypothesis builds prod variants over front door kind × P/D × multi-node × cache kind × partition
mode × autoscaling × names (names chosen to clash with what the front door, the P/D router and the
gateway derive) × system pool size, and runs the whole offline plan (`build_plan`: config, planner,
the Pulumi program under the mock runtime, the invariants). Each outcome is either a UserError
whose every problem names a key that is in the stack file as written (or, for a key to add, its
parent), or a plan whose invariants hold — checked again here, independently of the enforcement:
every object's identity and `--out` file name unique, nothing refused. Never a traceback.

Each hostile choice (an NFS share too small, a DPX partition, a 1-vCPU system node, observability
off under autoscaling, the gateway with P/D) is drawn less often than the choices that work, so that
a good share of the stacks plan and the invariant branch is exercised too (about 6 % of stacks
planned when every choice was equally likely).

The example count is modest by default (each example is a whole plan); `HYPOTHESIS_PROFILE=thorough`
runs many more.
"""

from __future__ import annotations

import copy
import os

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.commands.plan import manifest_filename
from infra.errors import UserError
from infra.invariants.objects import identity
from infra.offline import build_plan, kubernetes_objects
from tests.conftest import ROOT, make_project
from tests.invariants.keys import error_key_paths, key_exists, parent_path

settings.register_profile("invariants-default", max_examples=8, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("invariants-thorough", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
PROFILE = "invariants-" + os.environ.get("HYPOTHESIS_PROFILE", "default")

NS = "inference-platform:"
BASE = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
FABRIC = "gpu-mi325x8-2048gb-fabric-contracted"
NAMES = ["qwen3-235b", "router", "inference-gateway", "qwen3-30b-pd-router", "qwen3-30b-epp", "model-cache", "grafana-admin"]


@st.composite
def stacks(draw) -> dict:
    doc = copy.deepcopy(BASE)
    cfg = doc["config"]
    models, pools = cfg[NS + "models"], cfg[NS + "gpu_pools"]
    door = draw(st.sampled_from(["session", "round-robin", "gateway"]))
    cfg[NS + "router"] = {"kind": door, "replicas": draw(st.integers(1, 3))}
    if door == "gateway" and draw(st.booleans()):
        cfg[NS + "router"]["gateway"] = {"install_gateway_api_crds": draw(st.booleans())}
    shape = draw(st.sampled_from(["auto", "auto", "pd", "multi-node"]))
    if shape == "pd":
        models[1]["layout"] = draw(st.sampled_from(["p1tp4-d1tp4", "p1tp2-d1tp2", "p2tp2-d1tp4"]))
    elif shape == "multi-node":
        pools[0].update({"size": FABRIC, "fabric": True})
        pools[1].update({"size": FABRIC, "fabric": True})
        models[0]["layout"] = {"tp": 8, "ep": True, "dp": 2, "nodes_per_replica": 2}
    cache = draw(st.sampled_from(["nfs", "none", "spaces"]))
    if cache == "nfs":
        cfg[NS + "model_cache"] = {"kind": "nfs", "size_gib": draw(st.sampled_from([1024, 300, 1024, 100])), "tier": "high"}
    elif cache == "spaces":
        cfg[NS + "model_cache"] = {"kind": "spaces", "bucket": "acme-prod-weights"}
    else:
        cfg[NS + "model_cache"] = {"kind": "none"}
    mode = draw(st.sampled_from([None, None, "AMD_PARTITION_MODE_SPX_NPS1", None, "AMD_PARTITION_MODE_DPX_NPS2"]))
    if mode:
        pools[draw(st.integers(0, 1))]["partition_mode"] = mode
    if draw(st.sampled_from([False, False, False, True])):
        cfg[NS + "observability"] = {"enabled": False}
    scaling = draw(st.sampled_from(["as-is", "fixed", "none"]))
    if scaling == "fixed":
        pools[0].pop("min_nodes", None)
        pools[0].pop("max_nodes", None)
        pools[0]["nodes"] = 2
    elif scaling == "none":
        models[0].pop("autoscaling", None)
    models[0]["name"] = draw(st.sampled_from(NAMES))
    size = draw(st.sampled_from(["s-8vcpu-16gb", "s-4vcpu-8gb", "s-8vcpu-16gb", "s-1vcpu-2gb"]))
    cfg[NS + "cluster"]["system_pool"] = {"size": size, "nodes": draw(st.sampled_from([3, 2, 3, 1]))}
    return doc


def _problem_lines(err: UserError) -> list[str]:
    return [f"{p.path}: {p.message}" if p.path else p.message for p in err.problems]


@settings(settings.get_profile(PROFILE))
@given(doc=stacks())
def test_a_stack_plans_with_every_invariant_or_is_refused_by_key(doc, tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("prop"))
    (root / "stacks" / "Pulumi.prop.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    written = yaml.safe_load((root / "stacks" / "Pulumi.prop.yaml").read_text())
    try:
        plan = build_plan("prop", root)
    except UserError as err:
        for line in _problem_lines(err):
            for path in error_key_paths(line):
                parent = parent_path(path)
                assert key_exists(written, path) or (parent is not None and (parent == "" or key_exists(written, parent))), (
                    f"{path} is not in the stack file as written: {line}")
        return
    objects = kubernetes_objects(plan)
    ids = [identity(o) for o in objects]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    files = [manifest_filename(o) for o in objects]
    assert len(files) == len(set(files))
