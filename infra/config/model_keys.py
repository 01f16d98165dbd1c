"""Where a model's keys are written — for a model, and for the model a rollout candidate would become.

A rollout candidate (`models[i].rollout.candidate`) is a model too: once promoted it is the model
with the candidate's layout, image and extra_args. So every check that judges a model judges the
candidate-merged model as well (`candidate_as_model`), and reports each problem at the key the user
wrote: a key the candidate sets is under `models[i].rollout.candidate`, every other key (workload,
env, kv_offload, ...) is the model's own. `ModelKeys` is that mapping; a check takes one instead of
a string prefix and asks it for the path of the key it reports (`keys("extra_args[2]")`).

A problem the candidate only inherits (a key of the model's own, reported with the same words) is
the model's and reported once (`candidate_only`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from infra.config.base import NS

if TYPE_CHECKING:
    from infra.config.models import ModelConfig, RolloutCandidateConfig
    from infra.errors import Problem

# The model keys a candidate may set (RolloutCandidateConfig's fields); `layout` it always sets.
CANDIDATE_KEYS = ("layout", "image", "extra_args")
_HEAD = re.compile(r"^[^.\[]+")


@dataclass(frozen=True)
class ModelKeys:
    """Key paths of one model's settings as written in the stack file.

    base: `inference-platform:models[i]`; written_at: model key → where the candidate writes it
    instead (empty for the model itself)."""

    index: int
    written_at: dict[str, str] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"{NS}models[{self.index}]"

    @property
    def candidate(self) -> bool:
        return bool(self.written_at)

    def __call__(self, key: str = "") -> str:
        """The full path of model key `key` (`layout.max_model_len`, `extra_args[2]`, `env.X`)."""
        if not key:
            return self.base
        head = _HEAD.match(key).group(0)
        if head in self.written_at:
            return self.written_at[head] + key[len(head):]
        return f"{self.base}.{key}"

    def short(self, key: str = "") -> str:
        """`models[0].rollout.candidate.layout`: the path without the namespace, for messages."""
        return self(key).removeprefix(NS)

    @property
    def what(self) -> str:
        """How a message names the model these keys are of."""
        return f"the rollout candidate of models[{self.index}]" if self.candidate else f"models[{self.index}]"


def model_keys(index: int) -> ModelKeys:
    return ModelKeys(index)


def candidate_keys(index: int, candidate: RolloutCandidateConfig) -> ModelKeys:
    """The keys of the model `models[index].rollout.candidate` would become."""
    at = f"{NS}models[{index}].rollout.candidate"
    written = {k for k in CANDIDATE_KEYS if k == "layout" or getattr(candidate, k) is not None}
    return ModelKeys(index, {k: f"{at}.{k}" for k in CANDIDATE_KEYS if k in written})


def candidate_as_model(model: ModelConfig) -> ModelConfig | None:
    """The model its rollout candidate would become on `promote`: the candidate's layout, and its
    image and extra_args where it gives them (None without a rollout). No autoscaling (a model
    with a rollout runs without) and no rollout of its own."""
    if model.rollout is None:
        return None
    c = model.rollout.candidate
    update = {"layout": c.layout, "rollout": None}
    if c.image is not None:
        update["image"] = c.image
    if c.extra_args is not None:
        update["extra_args"] = list(c.extra_args)
    return model.model_copy(update=update)


def candidate_only(candidate: list[Problem], own: list[Problem]) -> list[Problem]:
    """The candidate's problems at keys the model has none at: a key the candidate inherits and the
    model's own check already refuses is reported once, at the model (its words may differ, e.g.
    which layout to change)."""
    refused = {p.path for p in own}
    return [p for p in dict.fromkeys(candidate) if p.path not in refused]
