"""Fuzzing the shipped stacks: whatever a stack file says, the toolkit plans it or refuses it cleanly.

Hypothesis mutates dev, staging and prod (a value of another type, a number out of range or not
finite, an unknown key, a deleted key, a value from another key) and runs the config and the
planner (`plan_stack(load_config(...))`, not the Pulumi mock run, for speed). Each outcome must be
either a plan whose every layout fits its pool — in memory, and in GPUs per node — or a
ConfigError whose every problem names what is wrong. Any other exception is a bug.
"""

from __future__ import annotations

import copy
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.catalog.gpus import GPU_SIZES
from infra.config import NS, load_config
from infra.errors import ConfigError
from infra.stack_plan import plan_stack
from tests.conftest import ROOT, STACKS, stack_values

BASES = {name: stack_values(name) for name in STACKS}


def _paths(node, prefix=()):
    """Every path into a config tree (mapping keys and list indices), containers included."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*prefix, index))


PATHS = {name: [p for p in _paths(values) if p] for name, (values, _) in BASES.items()}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "auto", "1e308", "x" * 300, "../etc/passwd", "tp99-r1", "gpu-h100x8-640gb", "hf_" + "a" * 30, "10.0.0.0/8"]),
    st.text(max_size=12),
)
values_strategy = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=6)


def _get(node, path):
    for part in path:
        node = node[part]
    return node


GPU_SLUGS = sorted(GPU_SIZES)
MODEL_IDS = [
    "Qwen/Qwen3-8B", "Qwen/Qwen3-32B", "Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8",
    "meta-llama/Llama-3.1-405B-Instruct", "meta-llama/Llama-3.3-70B-Instruct", "deepseek-ai/DeepSeek-R1",
    "openai/gpt-oss-120b", "mistralai/Mixtral-8x7B-Instruct-v0.1",
]


MULTI_NODE_LAYOUTS = [
    {"tp": 8, "ep": True, "dp": 2, "nodes_per_replica": 2},
    {"tp": 16, "nodes_per_replica": 2},
    {"tp": 4, "ep": True, "dp": 2, "nodes_per_replica": 2},
    {"tp": 8, "ep": True, "dp": 4, "nodes_per_replica": 4, "replicas_per_node": 2},
    {"disaggregated": "p1tp4-d1tp4", "nodes_per_replica": 2},
]


@st.composite
def mutations(draw, stack: str):
    """(path, operation, value) triples to apply to `stack`'s values: generic ones (types, ranges,
    unknown keys, deletions, values copied from elsewhere) and domain ones (another GPU size or
    model, the mutations that used to plan an impossible layout with exit 0)."""
    values = BASES[stack][0]
    count = draw(st.integers(min_value=1, max_value=3))
    out = []
    for _ in range(count):
        domain = draw(st.sampled_from(["generic", "generic", "size", "source", "multinode"]))
        if domain == "multinode":
            # a replica over nodes, on a pool that may or may not be a fabric pool that holds it
            index = draw(st.integers(min_value=0, max_value=len(values[NS + "models"]) - 1))
            layout = draw(st.sampled_from(MULTI_NODE_LAYOUTS))
            out.append(((NS + "models", index, "layout"), "set", dict(layout)))
            if draw(st.booleans()):
                pool = draw(st.integers(min_value=0, max_value=len(values[NS + "gpu_pools"]) - 1))
                out.append(((NS + "gpu_pools", pool, "size"), "set", "gpu-mi325x8-2048gb-fabric-contracted"))
                out.append(((NS + "gpu_pools", pool, "fabric"), "set", draw(st.booleans())))
            continue
        if domain == "size":
            index = draw(st.integers(min_value=0, max_value=len(values[NS + "gpu_pools"]) - 1))
            out.append(((NS + "gpu_pools", index, "size"), "set", draw(st.sampled_from(GPU_SLUGS))))
            continue
        if domain == "source":
            index = draw(st.integers(min_value=0, max_value=len(values[NS + "models"]) - 1))
            out.append(((NS + "models", index, "source"), "set", draw(st.sampled_from(MODEL_IDS))))
            continue
        path = draw(st.sampled_from(PATHS[stack]))
        op = draw(st.sampled_from(["set", "set", "scale", "delete", "unknown-key", "copy"]))
        if op == "set":
            out.append((path, op, draw(values_strategy)))
        elif op == "scale":
            out.append((path, op, draw(st.sampled_from([0, -1, 0.5, 2, 7, 1000, 1e6, 1e300, math.inf]))))
        elif op == "copy":
            out.append((path, op, draw(st.sampled_from(PATHS[stack]))))
        else:
            out.append((path, op, draw(st.text(min_size=1, max_size=10))))
    return out


def _apply(values: dict, mutation) -> None:
    path, op, arg = mutation
    try:
        parent = _get(values, path[:-1])
        current = parent[path[-1]]
    except (KeyError, IndexError, TypeError):
        return  # an earlier mutation removed or replaced this part of the tree
    if op == "set":
        parent[path[-1]] = copy.deepcopy(arg)
    elif op == "scale":
        if isinstance(current, int | float) and not isinstance(current, bool):
            parent[path[-1]] = current * arg if not isinstance(current, int) or isinstance(arg, float) else int(current * arg)
    elif op == "delete":
        del parent[path[-1]]
    elif op == "unknown-key":
        if isinstance(current, dict):
            current[arg] = 1
        elif isinstance(parent, dict):
            parent[f"{NS}{arg}" if not path[:-1] else arg] = current
    elif op == "copy":
        try:
            parent[path[-1]] = copy.deepcopy(_get(values, arg))
        except (KeyError, IndexError, TypeError):
            pass


def _check_plan(plan) -> None:
    """A plan that exists is one that can run: every layout fits, no pool is over-committed."""
    used: dict[str, int] = {}
    for model in plan.models:
        chosen = model.plan.chosen
        assert chosen.fits, f"{model.config.name}: {chosen.layout.name} does not fit: {chosen.reason}"
        gpus = model.pool.gpu.gpus
        assert 1 <= chosen.layout.gpus_per_node_used <= gpus, (model.config.name, chosen.layout.name, gpus)
        used[model.pool.name] = used.get(model.pool.name, 0) + chosen.layout.gpus_per_node_used
    for pool in plan.config.gpu_pools:
        assert used.get(pool.name, 0) <= pool.gpu.gpus, (pool.name, used[pool.name], pool.gpu.gpus)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_mutated_shipped_stack_plans_or_fails_cleanly(data):
    stack = data.draw(st.sampled_from(STACKS), label="stack")
    values, secret_keys = copy.deepcopy(BASES[stack][0]), set(BASES[stack][1])
    for mutation in data.draw(mutations(stack), label="mutations"):
        _apply(values, mutation)
    try:
        plan = plan_stack(load_config(values, stack=stack, secret_keys=secret_keys, base_dir=ROOT))
    except ConfigError as err:
        assert err.problems and all(p.message for p in err.problems)
        assert err.render().strip()
        return
    _check_plan(plan)
