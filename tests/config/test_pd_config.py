"""P/D layouts and fabric pools in a stack file: a staging variant plans and declares cleanly, and
each bad input is one clear error naming the key path, the value and what is allowed."""

from __future__ import annotations

import pytest

from infra.config import NS, load_config
from infra.errors import ConfigError
from infra.layout_fit import require_layouts_fit
from tests.conftest import ROOT, stack_values

FABRIC_SLUG = "gpu-mi325x8-2048gb-fabric-contracted"


def _staging(layout, **pool):
    values, secrets = stack_values("staging")
    values[f"{NS}models"][0]["layout"] = layout
    values[f"{NS}gpu_pools"][0].update(pool)
    return values, secrets


def _load(values, secrets):
    """The config's checks and then the plan's layout-fit check: what `infra plan` refuses before planning."""
    return require_layouts_fit(load_config(values, stack="staging", secret_keys=set(secrets), base_dir=ROOT))


def _error(values, secrets) -> str:
    with pytest.raises(ConfigError) as info:
        _load(values, secrets)
    message = info.value.render()
    assert "Traceback" not in message
    return message


def test_a_staging_variant_with_a_pd_layout_plans_and_declares():
    from infra.offline import record_stack_plan
    from infra.stack_plan import plan_stack

    cfg = _load(*_staging("p1tp4-ep-d1tp4-ep"))
    plan = plan_stack(cfg)
    (model,) = plan.models
    assert model.layout.name == "p1tp4-ep-d1tp4-ep" and model.plan.chosen.goodput_rps_per_node > 0
    assert model.plan.reason.startswith("explicit layout: ")
    resources, _ = record_stack_plan(plan)
    names = {r["name"] for r in resources}
    for part in ("engine-prefill", "engine-decode", "pd-router"):
        assert any(part in n for n in names), part


def test_the_mapping_form_carries_limits():
    cfg = _load(*_staging({"disaggregated": "p1tp4-d1tp4", "decode_max_num_seqs": 64, "kv_cache_dtype": "fp8"}))
    pd = cfg.models[0].layout.to_layout(8)
    assert pd.name == "p1tp4-d1tp4" and pd.decode_max_num_seqs == 64 and pd.kv_cache_dtype == "fp8"


def test_a_malformed_pd_name_names_the_grammar():
    message = _error(*_staging("p1tp4-d1"))
    assert "models[0].layout" in message and "p<N>tp<A>[-ep]-d<M>tp<B>[-ep]" in message and "'p1tp4-d1'" in message


def test_fabric_on_a_non_fabric_size_is_refused_naming_the_fabric_sizes():
    message = _error(*_staging("auto", fabric=True))
    assert "gpu_pools[0].fabric" in message and "gpu-mi300x8-1536gb" in message and FABRIC_SLUG in message


def test_a_unit_spanning_nodes_on_a_non_fabric_pool_is_refused():
    message = _error(*_staging("p1tp8-ep-d1tp8-ep"))
    assert "models[0].layout" in message and "fabric pool" in message


def test_a_unit_larger_than_the_pool_is_refused():
    message = _error(*_staging("p1tp8-ep-d1tp8-ep", size=FABRIC_SLUG, fabric=True, nodes=1, usd_per_hour=24.0))
    assert "models[0].layout" in message and "spans 2 nodes; the pool has 1" in message


def test_a_fabric_pool_large_enough_takes_a_unit_across_nodes():
    cfg = _load(*_staging("p1tp8-ep-d1tp8-ep", size=FABRIC_SLUG, fabric=True, nodes=2, usd_per_hour=24.0))
    assert cfg.gpu_pools[0].fabric


def test_a_unit_across_nodes_whose_engines_share_a_node_is_refused_naming_what_is_allowed():
    message = _error(*_staging("p8tp1-d8tp1", size=FABRIC_SLUG, fabric=True, nodes=2, usd_per_hour=24.0))
    assert "models[0].layout" in message and "p8tp1-d8tp1" in message
    assert "one pod at a time" in message and "8 prefill engine(s) of TP1" in message
    assert "p1tp8-d1tp8" in message and "p1tp8-ep-d1tp8-ep" in message


def test_a_pool_of_part_units_is_refused():
    message = _error(*_staging("p1tp8-d1tp8", size=FABRIC_SLUG, fabric=True, nodes=3, usd_per_hour=24.0))
    assert "gpu_pools[0].nodes" in message and "3 is not whole units" in message and "(2, 4, 6, ...)" in message


def test_an_engine_image_without_moriio_is_refused():
    values, secrets = _staging("p1tp4-d1tp4")
    values[f"{NS}models"][0]["image"] = "vllm/vllm-openai-rocm:v0.20.1"
    message = _error(values, secrets)
    assert "models[0].image" in message and "MoRIIOConnector" in message and "v0.21.0" in message


def test_autoscaling_a_unit_over_nodes_is_refused_naming_why():
    values, secrets = _staging("p1tp8-ep-d1tp8-ep", size=FABRIC_SLUG, fabric=True, nodes=None, min_nodes=2, max_nodes=4, usd_per_hour=24.0)
    values[f"{NS}models"][0]["autoscaling"] = {"enabled": True}
    message = _error(values, secrets)
    assert "models[0].autoscaling.enabled" in message and "spans 2 nodes" in message and "within one node" in message


def test_a_unit_within_one_node_autoscales_by_default_on_an_autoscaling_pool():
    values, secrets = _staging("p1tp4-d1tp4", nodes=None, min_nodes=1, max_nodes=3)
    assert _load(values, secrets).models[0].autoscaling.enabled is True
    values, secrets = _staging("p1tp8-ep-d1tp8-ep", size=FABRIC_SLUG, fabric=True, nodes=None, min_nodes=2, max_nodes=4, usd_per_hour=24.0)
    assert _load(values, secrets).models[0].autoscaling.enabled is False
