"""The models section's own checks: each model's keys against each other, and the model's source —
nothing another section says (the pool a model names, the front door, the weight cache: those are
infra/config/cross_checks.py).

A check here judges one model as it runs, so it is run for each model and for the model its
rollout candidate would become (infra/config/model_keys.py); each reports at the key as written.
infra/config/stack.py runs these and the cross-checks of a model in one fixed order, the order
their problems are reported in.
"""

from __future__ import annotations

from pathlib import Path

from infra.catalog.vllm_flags import canonical_flag
from infra.config.admin_switches import switches_on
from infra.config.base import NS
from infra.config.engine_flags import extra_args_problems
from infra.config.layout import PdLayoutConfig
from infra.config.model_keys import ModelKeys
from infra.config.models import ModelConfig, WorkloadConfig, hf_config_path
from infra.domain import session_shape
from infra.errors import Problem, UserError


def duplicate_api_names(models: list[ModelConfig]) -> list[Problem]:
    """Two models clients would name alike, reported at the key the user wrote: served_model_name,
    or source when served_model_name is unset (it defaults to the source)."""
    seen: dict[str, int] = {}
    problems = []
    for i, model in enumerate(models):
        value = model.api_model_name
        if value in seen:
            key = "served_model_name" if model.served_model_name else "source"
            problems.append(Problem(f"{NS}models[{i}].{key}", (
                f"{value!r} is already the API model name of models[{seen[value]}] (served_model_name, else the source); "
                "clients could not tell them apart: give each a distinct served_model_name")))
        else:
            seen[value] = i
    return problems


def unpinned_image(image: str | None) -> bool:
    """No tag, an empty tag (`vllm/vllm-openai:`) or `latest`; a digest (`@sha256:...`) pins."""
    if image is None:
        return False
    if "@" in image:
        return not image.rsplit("@", 1)[1]
    name, _, tag = image.rsplit("/", 1)[-1].partition(":")
    return not tag or tag == "latest"


def switch_value_problems(model: ModelConfig, keys: ModelKeys) -> list[Problem]:
    """The values of vLLM's administrative switches that vLLM cannot read (admin_switches.py); where a
    switch that is on is refused reads router.kind: cross_checks.py `admin_switch_problems`."""
    return switches_on(model, keys)[1]


def image_and_flag_problems(model: ModelConfig, keys: ModelKeys) -> list[Problem]:
    """An unpinned image, and `extra_args` elements that set what a key or the platform owns
    (engine_flags.py)."""
    problems = []
    if unpinned_image(model.image):
        problems.append(Problem(keys("image"), f"{model.image!r} is not pinned; give an explicit tag other than latest"))
    return problems + extra_args_problems(model, keys)


def offload_problems(model: ModelConfig, keys: ModelKeys) -> list[Problem]:
    """A KV transfer config beside an offload tier, and the tier's and the sessions' own keys."""
    problems = []
    if model.kv_offload.kind != "none":
        for j, arg in enumerate(model.extra_args):
            if canonical_flag(arg) == "--kv-transfer-config":
                problems.append(Problem(keys(f"extra_args[{j}]"), (
                    f"{arg!r} cannot be combined with kv_offload kind {model.kv_offload.kind}: vLLM writes the offload "
                    "connector into the KV transfer config from --kv-offloading-backend, replacing this one")))
    return problems + kv_offload_problems(model, keys)


def kv_offload_problems(model: ModelConfig, keys: ModelKeys) -> list[Problem]:
    """A tier needs its size (cpu, lmcache) and no other connector; the session model and a fixed
    hit rate are two answers to one question (lmcache's image reads the pool: cross_checks.py
    `lmcache_image_problems`)."""
    off, w, problems = model.kv_offload, model.workload, []
    if off.kind in ("cpu", "lmcache") and off.size_gib is None:
        problems.append(Problem(keys("kv_offload.size_gib"), f"required with kind {off.kind}: GiB of host memory per engine"))
    if off.kind in ("none", "auto") and off.size_gib is not None:
        problems.append(Problem(keys("kv_offload.size_gib"), f"not used with kind {off.kind} (cpu or lmcache take a size)"))
    if off.kind != "none" and isinstance(model.layout, PdLayoutConfig):
        problems.append(Problem(
            keys("kv_offload"),
            "not with a prefill/decode layout: its engines' --kv-transfer-config carries the P/D connector, which vLLM's "
            "offloading switch would replace (composing both through MultiConnector is not supported here)",
        ))
    if off.kind == "lmcache" and getattr(model.layout, "nodes_per_replica", 1) > 1:
        problems.append(Problem(
            keys("kv_offload"),
            "lmcache runs its server in the engine container of a single-node replica; a replica over nodes can use kind cpu",
        ))
    if off.kind == "auto" and w.turns_per_session == 1:
        problems.append(Problem(keys("kv_offload"), "auto needs workload.turns_per_session above 1: the planner decides from the sessions"))
    if w.turns_per_session > 1 and w.prefix_cache_hit_rate > 0:
        problems.append(Problem(
            keys("workload.prefix_cache_hit_rate"),
            "set prefix_cache_hit_rate or turns_per_session, not both: with sessions the planner predicts the hit rate",
        ))
    if w.turns_per_session == 1 and w.new_tokens_per_turn is not None:
        problems.append(Problem(keys("workload.new_tokens_per_turn"), "only with turns_per_session above 1"))
    problems += session_problems(w, keys)
    return problems


def session_problems(w: WorkloadConfig, keys: ModelKeys) -> list[Problem]:
    """The session model's own consistency (infra/domain.py `session_shape`)."""
    try:
        session_shape(w.to_workload())
    except ValueError as err:
        key = "workload.new_tokens_per_turn" if w.new_tokens_per_turn is not None else "workload.turns_per_session"
        return [Problem(keys(key), str(err))]
    return []


def model_source_problems(model: ModelConfig, at: str, base_dir: Path | None) -> list[Problem]:
    """The model's architecture must be known: a catalog id, or an hf_config file that parses
    (layout_fit.py then checks the layout against it)."""
    from infra.catalog.models import resolve_model  # local import: the catalog is large

    hf_path = hf_config_path(model, base_dir)
    if hf_path is not None:
        if not hf_path.is_file():
            return [Problem(f"{at}.hf_config", f"{model.hf_config!r} is not a file (paths are relative to the repository root)")]
    try:
        arch = resolve_model(model.source, str(hf_path) if hf_path else None)
    except (UserError, ValueError, OSError) as err:
        detail = err.render() if isinstance(err, UserError) else str(err)
        return [Problem(f"{at}.hf_config", f"cannot use {model.hf_config!r}: {detail}")]
    if arch is None:
        return [
            Problem(
                f"{at}.source",
                f"{model.source!r} is not in the model catalog; add hf_config: <path to its config.json> "
                "so the planner knows its architecture (see `infra layout --help` for catalog models)",
            )
        ]
    return []
