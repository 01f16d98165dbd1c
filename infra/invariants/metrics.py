"""Metric dependencies: what autoscaling, rules and dashboards read must still be exported.

KEDA's triggers (ScaledObject queries), the SLO, prefix-cache and rollout rules (PrometheusRule
expressions) and the dashboards read vLLM's series (`vllm:*`) per model, selected by
`model_name="<served model name>"`. A flag in an engine's command line can remove those series:
`--disable-log-stats` stops vLLM from logging stats, and vLLM builds its Prometheus stat logger
only when it logs them (vllm/v1/engine/async_llm.py: `log_stats = not disable_log_stats`, the
loggers of `setup_default_loggers` exist only with it) — every `vllm:*` series of that engine is
gone, so KEDA would never scale and the SLO alerts could never fire.

Generic over objects: exporters are the engine pod templates (the model label on them, the flags
in their containers), readers any object whose queries name a `vllm:` series (a ScaledObject, a
PrometheusRule, a dashboard ConfigMap), attributed to a model by their `model_name` matcher (a
query without one reads every model). A flag that removes what some reader needs is refused at
the key that set it: `models[i].extra_args[j]`, or the rollout candidate's.
"""

from __future__ import annotations

import re
from typing import Any

from infra.catalog.vllm_flags import canonical_flag
from infra.config.model_keys import candidate_keys, model_keys
from infra.errors import Problem
from infra.invariants.keypaths import MODEL_LABEL, KeyPaths
from infra.invariants.objects import all_pod_templates, describe, labels

VARIANT_LABEL = "inference-platform/variant"
# Flags that remove series, by the prefix of what they remove and why.
# What goes blind when a reader of the removed series does, by the reader's kind.
_READER_WORDS = {"ScaledObject": "autoscaling", "PrometheusRule": "the rules and alerts", "ConfigMap": "the dashboards"}
REMOVING_FLAGS = {
    "--disable-log-stats": ("vllm:", "turns off every vllm:* metric of the engine (vLLM builds its Prometheus stat logger "
                                      "only when it logs stats: vllm/v1/engine/async_llm.py)"),
}
_SERIES = re.compile(r"(?<![\w:])(vllm:[A-Za-z0-9_:]+)")
_MODEL_NAME = re.compile(r"model_name\s*=~?\s*\"((?:[^\"\\]|\\.)*)\"")


def _queries(obj: dict) -> list[str]:
    """The query texts an object holds: trigger queries, rule expressions, dashboard targets."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    if kind == "ScaledObject":
        return [str((t.get("metadata") or {}).get("query", "")) for t in spec.get("triggers") or []]
    if kind == "PrometheusRule":
        return [str(r.get("expr", "")) for g in spec.get("groups") or [] for r in g.get("rules") or []]
    if kind == "ConfigMap":
        return [str(v) for v in (obj.get("data") or {}).values() if "vllm:" in str(v)]
    return []


def readers(objects: list[dict]) -> dict[str | None, dict[str, set[str]]]:
    """served model name (None: every model) → reader description → the vllm: series it reads."""
    out: dict[str | None, dict[str, set[str]]] = {}
    for obj in objects:
        for query in _queries(obj):
            series = set(_SERIES.findall(query))
            if not series:
                continue
            names = {n.replace('\\"', '"') for n in _MODEL_NAME.findall(query)} or {None}
            for name in names:
                out.setdefault(name, {}).setdefault(describe(obj), set()).update(series)
    return out


def _flag_key(paths: KeyPaths, model: str, variant: str | None, flag: str) -> str | None:
    """The stack key that put `flag` on the engines of `model` (its variant's extra_args)."""
    index = paths.model_index(model)
    if index is None:
        return None
    cfg = paths.cfg.models[index]
    keys, args = model_keys(index), cfg.extra_args
    if variant == "candidate" and cfg.rollout is not None and cfg.rollout.candidate.extra_args is not None:
        keys, args = candidate_keys(index, cfg.rollout.candidate), cfg.rollout.candidate.extra_args
    for j, arg in enumerate(args):
        if canonical_flag(arg) == flag:
            return keys(f"extra_args[{j}]")
    return None


def _engine_flags(container: dict[str, Any]) -> set[str]:
    tokens = [str(t) for t in (container.get("command") or []) + (container.get("args") or [])]
    return {canonical_flag(t) for t in tokens if t.startswith("-")}


def check_metrics(objects: list[dict], paths: KeyPaths) -> list[Problem]:
    needed = readers(objects)
    served = {m.name: m.api_model_name for m in paths.cfg.models}
    problems = []
    for template in all_pod_templates(objects):
        model = template.labels.get(MODEL_LABEL) or labels(template.owner).get(MODEL_LABEL)
        if model not in served:
            continue
        flags = set().union(*(_engine_flags(c) for c in template.containers(init=False)))
        for flag, (prefix, why) in REMOVING_FLAGS.items():
            if flag not in flags:
                continue
            wanted = {**needed.get(None, {}), **needed.get(served[model], {})}
            blind = {reader: sorted(s for s in series if s.startswith(prefix)) for reader, series in wanted.items()}
            blind = {r: s for r, s in blind.items() if s}
            key = _flag_key(paths, model, template.labels.get(VARIANT_LABEL), flag)
            if not blind or key is None:
                continue
            said = "; ".join(f"{r} ({', '.join(s[:3])}{', ...' if len(s) > 3 else ''})" for r, s in sorted(blind.items()))
            blinded = [_READER_WORDS.get(r.split()[0], r.split()[0]) for r in sorted(blind)]
            problems.append(Problem(key, (
                f"{flag!r} {why}, and {len(blind)} object(s) of this plan read them for model {model}: {said}; "
                f"{' and '.join(dict.fromkeys(blinded))} would go blind: remove it")))
    return list(dict.fromkeys(problems))
