"""Value types every layer shares: a serving layout, a workload, SLOs, and a measurement's provenance.

This module sits at the bottom of the import graph (it imports nothing of the project): the
config, the planner, the tuning commands and the renderers all speak these shapes, so none of
them has to import another to agree on what a layout or a measurement is.

A layout says how one vLLM replica uses a node's GPUs and how many such replicas share a node,
or, on an RDMA fabric pool, how many whole nodes one replica spans. Its canonical name
`tp<N>[-ep][-dp<M>]-r<K>` (e.g. `tp4-ep-r2`: K replicas on each node) or
`tp<N>[-ep][-dp<M>]-n<J>` (e.g. `tp8-ep-dp2-n2`: one replica of tp × dp = 16 GPUs over J = 2
nodes) is what the planner's JSON, `infra bench --layouts` and `vllm bench --metadata layout=`
all use, so measurements and predictions can be joined on it.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import asdict, dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

_NAME = re.compile(
    r"^tp(?P<tp>[1-9][0-9]*)(?P<ep>-ep)?(?:-dp(?P<dp>[1-9][0-9]*))?(?:-r(?P<r>[1-9][0-9]*)|-n(?P<n>[1-9][0-9]*))$"
)
LAYOUT_NAME_GRAMMAR = "tp<N>[-ep][-dp<M>]-r<K> (K replicas per node) or tp<N>[-ep][-dp<M>]-n<J> (one replica over J nodes)"


@dataclass(frozen=True)
class Layout:
    """How a model is laid out on one node.

    tp: tensor-parallel size of one engine (vLLM --tensor-parallel-size).
    ep: experts sharded across the replica's GPUs instead of tensor-sliced (--enable-expert-parallel).
    dp: data-parallel attention ranks inside one replica (--data-parallel-size); the replica then
        uses tp × dp GPUs and, with ep, its experts are spread over all of them.
    replicas_per_node: independent vLLM engines per node, each with its own weights and KV cache.
    nodes_per_replica: whole nodes one replica spans (fabric pools only): with ep its dp ranks
        are spread over the nodes (vLLM's native multi-node data/expert parallelism, tp ≤ one
        node); without ep the tensor-parallel group itself spans them (tp = nodes × GPUs per
        node). Then replicas_per_node is 1 and tp × dp = nodes_per_replica × GPUs per node.
    """

    tp: int = 1
    ep: bool = False
    dp: int = 1
    replicas_per_node: int = 1
    nodes_per_replica: int = 1
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    gpu_memory_utilization: float = 0.90
    kv_cache_dtype: str = "auto"  # "auto" (the model dtype) or "fp8"
    max_model_len: int | None = None  # None: the workload's input + output, rounded up

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.dp

    @property
    def multi_node(self) -> bool:
        return self.nodes_per_replica > 1

    @property
    def fabric_nics(self) -> bool:
        """Its engine pods take their node's fabric NICs (a replica over several nodes)."""
        return self.multi_node

    @property
    def gpus_per_node_used(self) -> int:
        if self.multi_node:
            return self.gpus_per_replica // self.nodes_per_replica
        return self.gpus_per_replica * self.replicas_per_node

    @property
    def replicas_per_node_share(self) -> float:
        """Replicas per node as a fraction: replicas_per_node, or 1 / nodes_per_replica for a
        replica that spans nodes (what turns goodput per replica into goodput per node)."""
        return self.replicas_per_node / self.nodes_per_replica

    def replicas_for_nodes(self, nodes: int) -> int:
        """Replicas that `nodes` nodes run: replicas_per_node each, or whole multi-node groups."""
        return nodes // self.nodes_per_replica if self.multi_node else self.replicas_per_node * nodes

    @property
    def name(self) -> str:
        return layout_name(self.tp, self.ep, self.dp, self.replicas_per_node, self.nodes_per_replica)

    def with_(self, **changes) -> Layout:
        return replace(self, **changes)

    def fields(self) -> dict[str, Any]:
        """The layout as the keys of an explicit `layout:` mapping (LAYOUT_KEYS, in that order)."""
        values = asdict(self)
        return {key: values[key] for key in LAYOUT_KEYS}


# The keys of an explicit `layout:` mapping in a stack file, in the order they are written: the
# config accepts them, `infra tune ingest --write` writes them, the plan's JSON reports them.
LAYOUT_KEYS = (
    "tp",
    "ep",
    "dp",
    "replicas_per_node",
    "nodes_per_replica",
    "max_num_seqs",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "max_model_len",
)
# The parallel shape among them: what a layout name (tp4-ep-r2, tp8-ep-dp2-n2) says.
LAYOUT_SHAPE_KEYS = LAYOUT_KEYS[:5]
# The engine limits: what a layout name does not say, so a benchmark passes them as
# `--metadata layout_<key>=<value>` to rebuild the exact layout it measured.
LAYOUT_LIMIT_KEYS = LAYOUT_KEYS[5:]


def layout_name(tp: int, ep: bool, dp: int, replicas_per_node: int, nodes_per_replica: int = 1) -> str:
    """Canonical layout name, e.g. `tp4-ep-r2`, `tp1-ep-dp8-r1`, or `tp8-ep-dp2-n2` for one replica
    over two nodes (a replica that spans nodes is the only one on each of them)."""
    head = f"tp{tp}{'-ep' if ep else ''}{f'-dp{dp}' if dp > 1 else ''}"
    return f"{head}-n{nodes_per_replica}" if nodes_per_replica > 1 else f"{head}-r{replicas_per_node}"


def parse_layout_name(name: str) -> dict:
    """`tp4-ep-r2` → {"tp": 4, "ep": True, "dp": 1, "replicas_per_node": 2, "nodes_per_replica": 1};
    `tp8-ep-dp2-n2` → {..., "replicas_per_node": 1, "nodes_per_replica": 2}; ValueError if malformed."""
    m = _NAME.match(name.strip())
    if not m:
        raise ValueError(f"{name!r} is not a layout name; expected {LAYOUT_NAME_GRAMMAR}, e.g. tp4-ep-r2 or tp8-ep-dp2-n2")
    return {
        "tp": int(m["tp"]),
        "ep": bool(m["ep"]),
        "dp": int(m["dp"] or 1),
        "replicas_per_node": int(m["r"] or 1),
        "nodes_per_replica": int(m["n"] or 1),
    }


_PD_NAME = re.compile(
    r"^p(?P<pn>[0-9]+)tp(?P<pt>[0-9]+)(?P<pe>-ep)?-d(?P<dn>[0-9]+)tp(?P<dt>[0-9]+)(?P<de>-ep)?$"
)
PD_NAME_GRAMMAR = "p<N>tp<A>[-ep]-d<M>tp<B>[-ep]"


@dataclass(frozen=True)
class PdLayout:
    """A prefill/decode-disaggregated layout: N prefill engines of TP A and M decode engines of TP B.

    One *unit* is the N + M engines the P/D router balances between; its GPUs (N·A + M·B) either
    fit one node (KV moves over xGMI / NVLink) or span `nodes_per_unit` nodes (KV moves over the
    RDMA fabric). Prefill engines only compute prompts (vLLM `kv_role: kv_producer`), decode
    engines only generate (`kv_consumer`), so each side has its own batch limits. The canonical
    name `p1tp4-d1tp4` (or `p1tp4-ep-d1tp4-ep` with expert parallelism) is what the planner's
    JSON and `infra bench --layouts` use, like `tp4-ep-r2` for a colocated layout.

    It answers the questions the planner and the stack ask of a `Layout` (name, GPUs per replica
    and per node, replicas per node, batch budget, `fields()`), so a P/D candidate ranks next to
    colocated ones without a second code path: one unit counts as one "replica".
    """

    prefill_instances: int = 1
    prefill_tp: int = 1
    decode_instances: int = 1
    decode_tp: int = 1
    prefill_ep: bool = False
    decode_ep: bool = False
    gpus_per_node: int = 8  # the node it was planned for: whether a unit spans nodes
    prefill_max_num_batched_tokens: int = 8192
    decode_max_num_seqs: int = 256
    gpu_memory_utilization: float = 0.90
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = None

    disaggregated = True
    dp = 1
    nodes_per_replica = 1  # a unit spans nodes by its own size (nodes_per_unit), not as a colocated replica
    multi_node = False

    @property
    def unit_gpus(self) -> int:
        return self.prefill_instances * self.prefill_tp + self.decode_instances * self.decode_tp

    @property
    def nodes_per_unit(self) -> int:
        return -(-self.unit_gpus // self.gpus_per_node)

    @property
    def spans_nodes(self) -> bool:
        return self.nodes_per_unit > 1

    @property
    def units_per_node(self) -> int:
        """Whole units on one node (0 when a unit spans nodes)."""
        return self.gpus_per_node // self.unit_gpus

    @property
    def fabric_nics(self) -> bool:
        """Its engine pods take their node's fabric NICs: the unit spans nodes, KV moves over RDMA."""
        return self.spans_nodes

    def span_problem(self) -> str | None:
        """Why a unit spanning nodes cannot get its RDMA NICs, or None (one node, or every engine
        the one pod on its node).

        The rule: a unit that spans nodes renders only when every prefill and every decode engine
        takes a whole node (prefill TP = decode TP = GPUs per node), e.g. p1tp8-d1tp8,
        p1tp8-ep-d1tp8-ep, p2tp8-d1tp8. Why: across nodes each engine moves KV over its node's
        fabric NICs (`rdma/fabric0..7`, attached by Multus host-device), and host-device moves a
        NIC into one pod's network namespace, so on a node only one pod can hold the NICs
        (FACTS-serving §C). The RDMA device plugin DOKS installs is a *shared* one, so the
        scheduler would not keep a second NIC-requesting pod off the node; the GPU request does:
        the render (render/pd_service.py) lays each side out as a Deployment of instances × units
        pods of TP GPUs each, kept apart only by their GPU requests (the hostname spread is a
        ScheduleAnyway preference), so an engine of fewer GPUs than the node shares it with other
        engines of either side (p8tp1-d8tp1 puts 8 pods on each node), and only an engine of the
        whole node's GPUs is guaranteed the node to itself.
        """
        if not self.spans_nodes:
            return None
        n = self.gpus_per_node
        shared = [(role, i, tp) for role, i, tp in (("prefill", self.prefill_instances, self.prefill_tp),
                                                    ("decode", self.decode_instances, self.decode_tp)) if tp != n]
        if not shared:
            return None
        sides = " and ".join(f"{i} {role} engine(s) of TP{tp}" for role, i, tp in shared)
        return (
            f"spans {self.nodes_per_unit} nodes, so its engines move KV over the fabric NICs, and each NIC attaches to "
            f"one pod at a time: only an engine that is the one pod on its node can hold the node's {n} NICs, but its "
            f"{sides} would share nodes. Allowed across nodes: every engine a whole node (TP{n} on both sides), e.g. "
            f"p1tp{n}-d1tp{n}, p1tp{n}-ep-d1tp{n}-ep or p2tp{n}-d1tp{n}; or a unit of at most {n} GPUs on one node, "
            f"e.g. p1tp{n // 2}-d1tp{n // 2}"
        )

    # --- what a Layout answers -------------------------------------------------------------
    @property
    def tp(self) -> int:
        return self.decode_tp

    @property
    def ep(self) -> bool:
        return self.decode_ep

    @property
    def replicas_per_node(self) -> int:
        return max(1, self.units_per_node)

    @property
    def gpus_per_replica(self) -> int:
        return self.unit_gpus

    @property
    def replicas_per_node_share(self) -> float:
        return 1.0 / self.nodes_per_unit if self.spans_nodes else float(self.replicas_per_node)

    def replicas_for_nodes(self, nodes: int) -> int:
        """Units that `nodes` nodes run: units_per_node each, or whole units over nodes_per_unit."""
        return nodes // self.nodes_per_unit if self.spans_nodes else self.replicas_per_node * nodes

    @property
    def gpus_per_node_used(self) -> int:
        if self.spans_nodes:
            return min(self.gpus_per_node, self.unit_gpus)
        return self.unit_gpus * self.units_per_node

    @property
    def max_num_batched_tokens(self) -> int:
        return self.prefill_max_num_batched_tokens

    @property
    def max_num_seqs(self) -> int:
        return self.decode_max_num_seqs

    @property
    def name(self) -> str:
        return pd_layout_name(
            self.prefill_instances, self.prefill_tp, self.prefill_ep, self.decode_instances, self.decode_tp, self.decode_ep
        )

    def with_(self, **changes) -> PdLayout:
        return replace(self, **changes)

    def fields(self) -> dict[str, Any]:
        """The LAYOUT_KEYS a colocated layout reports (decode engine's TP/EP, one unit as one replica,
        the prefill token budget), then each side's shape."""
        return {
            "tp": self.tp,
            "ep": self.ep,
            "dp": 1,
            "replicas_per_node": self.replicas_per_node,
            "nodes_per_replica": 1,  # a unit spans nodes_per_unit nodes, below
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "disaggregated": True,
            "prefill": {"instances": self.prefill_instances, "tp": self.prefill_tp, "ep": self.prefill_ep,
                        "max_num_batched_tokens": self.prefill_max_num_batched_tokens},
            "decode": {"instances": self.decode_instances, "tp": self.decode_tp, "ep": self.decode_ep,
                       "max_num_seqs": self.decode_max_num_seqs},
            "nodes_per_unit": self.nodes_per_unit,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "kv_cache_dtype": self.kv_cache_dtype,
            "max_model_len": self.max_model_len,
        }

    def side(self, role: str) -> Layout:
        """One engine of a side as a colocated Layout (what the memory and step models take)."""
        prefill = role == "prefill"
        return Layout(
            tp=self.prefill_tp if prefill else self.decode_tp,
            ep=self.prefill_ep if prefill else self.decode_ep,
            dp=1,
            replicas_per_node=1,
            max_num_seqs=256 if prefill else self.decode_max_num_seqs,
            max_num_batched_tokens=self.prefill_max_num_batched_tokens if prefill else 8192,
            gpu_memory_utilization=self.gpu_memory_utilization,
            kv_cache_dtype=self.kv_cache_dtype,
            max_model_len=self.max_model_len,
        )


def pd_layout_name(pn: int, ptp: int, pep: bool, dn: int, dtp: int, dep: bool) -> str:
    """Canonical P/D layout name, e.g. `p1tp4-d1tp4` or `p2tp2-ep-d1tp4-ep`."""
    return f"p{pn}tp{ptp}{'-ep' if pep else ''}-d{dn}tp{dtp}{'-ep' if dep else ''}"


def is_pd_layout_name(name: str) -> bool:
    """Whether `name` is meant as a P/D layout (starts like one), so a malformed one gets the P/D error."""
    return bool(re.match(r"^p[0-9]", name.strip()))


def parse_pd_layout_name(name: str) -> dict:
    """`p1tp4-d1tp4` → {"prefill_instances": 1, "prefill_tp": 4, ...}; ValueError naming what is wrong."""
    m = _PD_NAME.match(name.strip())
    if not m:
        raise ValueError(
            f"{name!r} is not a P/D layout name; expected {PD_NAME_GRAMMAR} "
            "(N prefill engines of TP A, M decode engines of TP B), e.g. p1tp4-d1tp4"
        )
    values = {"prefill_instances": int(m["pn"]), "prefill_tp": int(m["pt"]),
              "decode_instances": int(m["dn"]), "decode_tp": int(m["dt"])}
    zero = [k for k, v in values.items() if v < 1]
    if zero:
        raise ValueError(f"{name!r}: {', '.join(zero)} must be at least 1 (grammar {PD_NAME_GRAMMAR})")
    return {**values, "prefill_ep": bool(m["pe"]), "decode_ep": bool(m["de"])}


@dataclass(frozen=True)
class Workload:
    """What the traffic looks like: mean prompt and completion lengths, and the peak request rate."""

    input_tokens: int
    output_tokens: int
    peak_rps: float | None = None
    prefix_cache_hit_rate: float = 0.0  # share of prompt tokens served from the prefix cache
    # The session model (infra/planner/prefix_cache.py): a conversation of `turns_per_session`
    # requests whose prompts grow by each answer and `new_tokens_per_turn` (None: derived so the
    # mean prompt is input_tokens), `think_time_s` apart on average. 1 turn: no session model,
    # prefix_cache_hit_rate is taken as given.
    turns_per_session: int = 1
    think_time_s: float = 60.0
    new_tokens_per_turn: int | None = None

    @property
    def multi_turn(self) -> bool:
        return self.turns_per_session > 1


@dataclass(frozen=True)
class SessionShape:
    """A workload's conversations: turns, new tokens per turn, and the prompt share they re-send."""

    turns: int
    new_tokens_per_turn: float
    think_time_s: float
    reusable_share: float  # of all prompt tokens, the share that repeats an earlier turn's history


def derived_new_tokens_per_turn(input_tokens: int, output_tokens: int, turns: int) -> float:
    """New user tokens per turn that make the mean prompt over a session `input_tokens`.

    Turn k's prompt is n + (k − 1)(n + output); its mean over k = 1..T is
    n + (T − 1)/2 · (n + output). Solved for n; ≤ 0 means the answers alone outgrow the prompt.
    """
    half = (turns - 1) / 2.0
    return (input_tokens - half * output_tokens) / (1.0 + half)


# How far the mean prompt a given `new_tokens_per_turn` implies may be from input_tokens (rounding
# and round figures) before the two contradict each other.
SESSION_MEAN_TOLERANCE = 0.10


def implied_mean_prompt(new_tokens_per_turn: float, output_tokens: int, turns: int) -> float:
    """The mean prompt over a session whose turns add `new_tokens_per_turn` user tokens each:
    n + (T − 1)/2 · (n + output) (see `derived_new_tokens_per_turn`)."""
    return new_tokens_per_turn + (turns - 1) / 2.0 * (new_tokens_per_turn + output_tokens)


def longest_prompt_tokens(workload: Workload) -> int:
    """The prompt of a session's last turn: n + (T − 1)(n + output), where n is the new tokens per
    turn; the whole history re-sent. Single-turn traffic: input_tokens."""
    if not workload.multi_turn:
        return workload.input_tokens
    turns = workload.turns_per_session
    new = (float(workload.new_tokens_per_turn) if workload.new_tokens_per_turn is not None
           else derived_new_tokens_per_turn(workload.input_tokens, workload.output_tokens, turns))
    return math.ceil(new + (turns - 1) * (new + workload.output_tokens))


def session_shape(workload: Workload) -> SessionShape | None:
    """The session model of a workload, or None for single-turn traffic.

    Raises ValueError (a message for the stack's `workload`) when the fields contradict each
    other: the answers of T turns outgrow the mean prompt, or the new tokens given imply another
    mean prompt than input_tokens.
    """
    if not workload.multi_turn:
        return None
    turns, prompt = workload.turns_per_session, workload.input_tokens
    if workload.new_tokens_per_turn is None:
        new = derived_new_tokens_per_turn(prompt, workload.output_tokens, turns)
        if new < 1:
            raise ValueError(
                f"{turns} turns of {workload.output_tokens}-token answers make a mean prompt above input_tokens "
                f"{prompt}: raise input_tokens, or lower turns_per_session or output_tokens"
            )
    else:
        new = float(workload.new_tokens_per_turn)
        implied = implied_mean_prompt(new, workload.output_tokens, turns)
        if abs(implied - prompt) > SESSION_MEAN_TOLERANCE * prompt:
            derived = derived_new_tokens_per_turn(prompt, workload.output_tokens, turns)
            fits = (f"give about {max(1, round(derived))} (what input_tokens implies) or leave it unset"
                    if derived >= 1 else "no new_tokens_per_turn fits these turns and answers: lower turns_per_session or output_tokens")
            raise ValueError(
                f"new_tokens_per_turn {workload.new_tokens_per_turn} over {turns} turns of {workload.output_tokens}-token answers "
                f"makes a mean prompt of {implied:.0f} tokens (n + (turns − 1)/2 · (n + output_tokens)), not input_tokens "
                f"{prompt} (more than {SESSION_MEAN_TOLERANCE:.0%} apart); {fits}, or set input_tokens to {implied:.0f}"
            )
    return SessionShape(turns, new, workload.think_time_s, 1.0 - new / prompt)


@dataclass(frozen=True)
class KvOffload:
    """A second KV-cache tier in host memory for every replica of a model.

    kind: "cpu" (vLLM's native OffloadingConnector, `--kv-offloading-backend native`) or
        "lmcache" (LMCache's CPU tier, `--kv-offloading-backend lmcache`).
    size_gib: cpu: host memory per data-parallel engine of a replica (vLLM's
        `--kv-offloading-size`: the total over the engine's TP ranks, each pinning its share);
        lmcache: the L1 buffer of the engine pod's one LMCache server, shared by its engines.
    """

    kind: str
    size_gib: float

    @property
    def backend(self) -> str:
        """The value of vLLM's `--kv-offloading-backend`."""
        return "native" if self.kind == "cpu" else self.kind

    def gib_per_engine(self, engines_per_pod: int) -> float:
        """Host memory one data-parallel engine's share of the tier holds."""
        return self.size_gib / max(1, engines_per_pod) if self.kind == "lmcache" else self.size_gib

    def gib_per_pod(self, engines_per_pod: int) -> float:
        """Host memory the tier pins in one engine pod."""
        return self.size_gib if self.kind == "lmcache" else self.size_gib * max(1, engines_per_pod)


@dataclass(frozen=True)
class Slo:
    """Latency limits at the 90th percentile."""

    ttft_p90_ms: float
    tpot_p90_ms: float


# The slowest SLO burn-rate alert reads this many days of history: Prometheus must retain at
# least that much (the config refuses a shorter retention; the rules assert their windows fit).
LONGEST_SLO_WINDOW_DAYS = 3

# Bounds of a workload and its SLOs, shared by the stack config and the command-line flags
# (`infra layout`, `infra tune`), so a value refused in one is refused in the other. Beyond them a
# figure is a typo, not a workload: no model reads more than a million prompt tokens, vLLM's
# largest models emit at most 256 Ki tokens, a p90 TTFT of ten minutes or a TPOT of a minute is no
# interactive service, and 100,000 req/s is far beyond any GPU fleet one stack declares.
MAX_INPUT_TOKENS = 1_048_576
MAX_OUTPUT_TOKENS = 262_144
MAX_TTFT_P90_MS = 600_000.0
MAX_TPOT_P90_MS = 60_000.0
MAX_PEAK_RPS = 100_000.0
MAX_TURNS_PER_SESSION = 1000  # beyond it a session model predicts nothing a long-lived agent needs


# --------------------------------------------------------------------------- provenance


def _iso_text(value: Any) -> Any:
    """An unquoted YAML timestamp arrives as a date or datetime: keep it as the ISO text written."""
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    return value


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SloRecord(_Record):
    """The SLO a measured goodput is a rate within."""

    ttft_p90_ms: float = Field(gt=0, allow_inf_nan=False, description="p90 TTFT limit of the measurement, ms.")
    tpot_p90_ms: float = Field(gt=0, allow_inf_nan=False, description="p90 TPOT limit of the measurement, ms.")


class WorkloadRecord(_Record):
    """The prompt and answer lengths a measured goodput holds for."""

    input_tokens: int = Field(gt=0, description="Prompt tokens of the measurement.")
    output_tokens: int = Field(gt=0, description="Output tokens of the measurement.")
    turns_per_session: int | None = Field(
        None, gt=1, description="Turns per conversation of a multi-turn replay (`infra bench --dataset multi-turn`); unset: single-turn prompts.",
    )
    think_time_s: float | None = Field(None, gt=0, allow_inf_nan=False, description="Mean think time between turns of the multi-turn replay, seconds.")


class Provenance(_Record):
    """Where a measured layout came from: written by `infra tune ingest --write` next to the layout.

    A measurement beats a prediction, so a layout that carries `measured_goodput_rps` sizes its
    pool from it. The goodput holds only for the conditions it was measured under (`slo`,
    `workload`, `gpu`); the plan says when the stack's current ones differ. Older provenance
    without those keys is accepted as is; `None` means "not recorded".
    """

    measured_at: Annotated[str | None, BeforeValidator(_iso_text)] = Field(
        None, description="When the winning runs were measured (ISO 8601, from the results' `date`)."
    )
    vllm_version: str | None = Field(None, description="vLLM version the benchmark ran.")
    image: str | None = Field(None, description="Engine image the benchmark ran.")
    measured_goodput_rps: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="Measured requests/s per node within the SLO."
    )
    predicted_goodput_rps: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="The planner's requests/s per node for this layout at measurement time."
    )
    source_results: list[str] = Field(default_factory=list, description="The `vllm bench serve` result files the winner was chosen from.")
    slo: SloRecord | None = Field(None, description="The SLO the goodput was measured within.")
    workload: WorkloadRecord | None = Field(None, description="The token lengths it was measured with.")
    gpu: str | None = Field(None, description="GPU Droplet size slug it was measured on.")
    ready_seconds: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="Measured seconds from an engine pod's start to Ready (the slowest replica of the layout); the plan uses it for time-to-ready when weights_source matches the stack's.",
    )
    weights_source: Literal["huggingface", "nfs", "spaces", "local"] | None = Field(
        None, description="Where the measured engines read their weights: huggingface, nfs, spaces or local.",
    )

    @property
    def measured(self) -> bool:
        """A measurement: provenance without a goodput only says where a hand-written layout came from."""
        return self.measured_goodput_rps is not None

    @property
    def date(self) -> str | None:
        """The day of the measurement (the time of day adds nothing to a plan line)."""
        return self.measured_at[:10] if self.measured_at else None

    def label(self) -> str:
        """`bench 2026-12-02, vLLM 0.33.0`: enough to find the results again."""
        parts = [f"bench {self.date}" if self.date else "bench date not recorded"]
        if self.vllm_version:
            parts.append(f"vLLM {self.vllm_version}")
        return ", ".join(parts)

    def changed_conditions(self, slo: Slo, workload: Workload, gpu: str) -> list[str]:
        """What differs between the recorded conditions and the stack's current ones, as
        "measured → now" phrases; nothing for conditions not recorded."""
        changes = []
        if self.slo is not None and (self.slo.ttft_p90_ms, self.slo.tpot_p90_ms) != (slo.ttft_p90_ms, slo.tpot_p90_ms):
            changes.append(
                f"SLO p90 TTFT/TPOT {self.slo.ttft_p90_ms:g}/{self.slo.tpot_p90_ms:g} ms → "
                f"{slo.ttft_p90_ms:g}/{slo.tpot_p90_ms:g} ms"
            )
        w = self.workload
        if w is not None and (w.input_tokens, w.output_tokens) != (workload.input_tokens, workload.output_tokens):
            changes.append(
                f"tokens in/out {w.input_tokens}/{w.output_tokens} → {workload.input_tokens}/{workload.output_tokens}"
            )
        if self.gpu is not None and self.gpu != gpu:
            changes.append(f"GPU {self.gpu} → {gpu}")
        return changes


PROVENANCE_KEYS = tuple(Provenance.model_fields)
