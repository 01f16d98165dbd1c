"""Values a plan cannot know until something exists: typed placeholders inside planned inputs.

A planned resource's inputs are plain data (the rendered Kubernetes object, a node pool's size)
except where a value comes from somewhere the plan never sees:

- `Ref`: an output of another planned resource (the cluster's id, the NFS share's address), known
  once that resource exists;
- `SecretInput`: a secret from the stack's configuration (the Hugging Face token, a named API key),
  which the plan never reads;
- `Invoke`: the answer of a provider function (DigitalOcean's Kubernetes releases, the cluster's
  live kubeconfig);
- `Apply`: a pure function of other values (the client proxy's key file built from the keys);
- `Secret`: any value that must travel as a secret (Pulumi's `Output.secret`).

`declare` turns each into a Pulumi Output; the offline plan shows each as what it stands for
(`infra/resource_graph/offline_values.py`), and both follow the same dependencies: a value that
reads another resource's output makes its resource depend on that one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Ref:
    """Output `output` (its engine-level name: `id`, `mountPath`, `kubeConfigs`) of the planned
    resource `resource` (its key, `type::name`)."""

    resource: str
    output: str
    secret: bool = False


@dataclass(frozen=True)
class SecretInput:
    """A secret of the stack's configuration, by key (`huggingface_token`, `api_keys.web`)."""

    key: str


@dataclass(frozen=True)
class Secret:
    """`value` travels as a secret: in state encrypted, in the plan `[secret]`."""

    value: Any


@dataclass(frozen=True)
class Invoke:
    """The answer of provider function `token` called with `args`, at `path` inside the answer.

    blocking: called while the program declares (its answer decides what is declared, and a bad
    answer stops the program before anything is sent); else an Output, after `depends_on`.
    check: a pure function of the looked-up value that returns it or raises a ConfigError.
    """

    token: str
    args: Mapping[str, Any]
    path: tuple[str | int, ...]
    depends_on: tuple[str, ...] = ()
    blocking: bool = False
    secret: bool = False
    check: Callable[[Any], Any] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Apply:
    """`fn(*args)` once every argument is known: a pure function (a renderer's), never Pulumi."""

    fn: Callable[..., Any] = field(compare=False)
    args: tuple[Any, ...]
    name: str = ""  # for messages and equality: the function's qualified name

    def __post_init__(self) -> None:
        if not self.name:
            module = getattr(self.fn, "__module__", None) or type(self.fn).__module__
            object.__setattr__(self, "name", f"{module}.{getattr(self.fn, '__qualname__', repr(self.fn))}")


PLACEHOLDERS = (Ref, SecretInput, Secret, Invoke, Apply)


def placeholders(value: Any) -> Iterator[Any]:
    """Every placeholder in `value` (dicts, lists and tuples walked; placeholders' own arguments
    included), outermost first."""
    if isinstance(value, PLACEHOLDERS):
        yield value
        inner: Any = ()
        if isinstance(value, Secret):
            inner = value.value
        elif isinstance(value, Invoke):
            inner = value.args
        elif isinstance(value, Apply):
            inner = value.args
        yield from placeholders(inner)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from placeholders(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from placeholders(item)


def referenced_resources(value: Any) -> list[str]:
    """The planned resources whose outputs `value` reads (its dependencies), in first-seen order."""
    seen: list[str] = []
    for p in placeholders(value):
        keys = [p.resource] if isinstance(p, Ref) else list(p.depends_on) if isinstance(p, Invoke) else []
        seen += [k for k in keys if k not in seen]
    return seen


def is_secret(value: Any) -> bool:
    """Whether `value` carries anything secret (a secret input, a secret output or a wrapped secret)."""
    return any(
        isinstance(p, (SecretInput, Secret)) or (isinstance(p, (Ref, Invoke)) and p.secret) for p in placeholders(value)
    )
