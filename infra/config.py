"""The typed, validated stack configuration: the toolkit's user interface.

Everything a stack file can say is declared here, with a type, a default and a description; the
configuration reference (docs/configuration.md) is generated from these declarations so the two
cannot drift. Validation happens in two passes before a single resource is declared:

1. structure (pydantic, strict): unknown keys, wrong types, bad enum values, out-of-range numbers,
   unknown regions / GPU slugs, malformed CIDRs, Droplet slugs and model ids, `vllm serve` flags
   and VLLM_* variables the pinned vLLM does not know — all collected in one pass;
2. cross-references (only once the structure is sound): pools that models name, duplicates,
   node-count ranges, CIDR overlaps, layouts against the model and the node, secrets.

Every problem is reported together, as `inference-platform:<key path>: <what is wrong>; <what is
allowed>`, via `ConfigError`. Secrets are never read here as values: only whether each is set and
whether it was set as a secret.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from infra.catalog import doks, versions
from infra.catalog.cpu_sizes import CPU_USD_PER_MONTH
from infra.catalog.gpus import GPU_SIZES, GpuSize
from infra.catalog.regions import REGIONS
from infra.catalog.spaces import (
    NEAREST_SPACES_REGION,
    SPACES_REGIONS,
    SPACES_REGIONS_SOURCE,
    bucket_name_problem,
)
from infra.catalog.vllm_flags import (
    canonical_flag,
    clashes_with_service_env,
    unknown_env_vars,
    unknown_flags,
    vllm_flags,
)
from infra.compat import unsupported_pins
from infra.domain import (
    LONGEST_SLO_WINDOW_DAYS,
    MAX_INPUT_TOKENS,
    MAX_OUTPUT_TOKENS,
    MAX_PEAK_RPS,
    MAX_TPOT_P90_MS,
    MAX_TTFT_P90_MS,
    MAX_TURNS_PER_SESSION,
    KvOffload,
    Layout,
    PdLayout,
    Provenance,
    Slo,
    Workload,
    is_pd_layout_name,
    parse_pd_layout_name,
)
from infra.durations import duration_days
from infra.errors import ConfigError, Problem, UserError, yaml_error_line

PROJECT = "inference-platform"
NS = f"{PROJECT}:"
ENVIRONMENTS = ("dev", "staging", "prod")

# Config keys that hold secrets. They are only ever read as Pulumi secrets and never appear in the
# validated config object; the program fetches them with `pulumi.Config.require_secret`.
SECRET_KEYS: dict[str, str] = {
    "huggingface_token": "Hugging Face access token for gated models and higher download limits",
    "api_key": "API key clients must send (`Authorization: Bearer ...`) to the router / model services",
    "grafana_admin_password": "Grafana admin password (required when observability is enabled)",
    "alert_webhook_url": "Alertmanager webhook URL (Slack or generic); required by receiver kinds slack and webhook",
}
PROVIDER_SECRET_KEYS = ("digitalocean:token", "digitalocean:spacesSecretKey")
# The DigitalOcean provider creates Spaces buckets with a Spaces key of its own (not the API token):
# `pulumi config set digitalocean:spacesAccessId ...` and `--secret digitalocean:spacesSecretKey ...`
# (or SPACES_ACCESS_KEY_ID / SPACES_SECRET_ACCESS_KEY in the environment).
SPACES_PROVIDER_KEYS = ("digitalocean:spacesAccessId", "digitalocean:spacesSecretKey")
# Config namespaces a stack file may use besides ours: the providers the program runs and Pulumi's
# own (`pulumi:tags`, ...). A key in any other namespace would be read by nobody, so it is refused:
# `inference-platfrom:observability` once switched monitoring off without a word.
OTHER_NAMESPACES = ("digitalocean", "kubernetes", "pulumi")

# Stack names become DigitalOcean resource names (`<stack>-doks`, `<stack>-net-vpc`) and file names
# (`stacks/Pulumi.<stack>.yaml`): DNS-label characters only, so no name reaches outside stacks/.
_STACK_NAME = re.compile(r"^[a-z][a-z0-9-]{0,38}[a-z0-9]$")
STACK_NAME_RULE = (
    "2 to 40 characters of lowercase letters, digits and '-', starting with a letter and ending with a "
    "letter or digit (e.g. staging-eu)"
)


_HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_COMMIT_HASH = re.compile(r"^[0-9a-f]{40}$")
_DNS_LABEL = re.compile(r"^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$")
_HEADER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")
_HHMM = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
# DigitalOcean's CPU Droplet slugs: `c-<vcpus>` (CPU-optimized), else `<family>-<n>vcpu-<ram>`
# with an optional disk size (`s-2vcpu-8gb-160gb-intel`), then an optional CPU-vendor suffix.
_CPU_SLUG = re.compile(
    r"^(c-[0-9]+|(s|g|gd|m|m3|m6|so|so1_5|c2)-[0-9]+vcpu-[0-9]+(mb|gb)(-[0-9]+gb)?)(-amd|-intel)?$"
)


# --------------------------------------------------------------------------- field validators


def _one_of(value: str, allowed: list[str], what: str) -> str:
    if value in allowed:
        return value
    close = difflib.get_close_matches(value, allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"{value!r} is not a {what}{hint}; allowed: {', '.join(allowed)}")


def _region(value: str) -> str:
    return _one_of(value, sorted(REGIONS), "DigitalOcean region")


def _gpu_slug(value: str) -> str:
    return _one_of(value, sorted(GPU_SIZES), "GPU Droplet size")


def _cidr(value: str) -> str:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as err:
        raise ValueError(f"{value!r} is not a valid CIDR ({err}); e.g. 10.20.0.0/20") from None
    if net.version != 4:
        raise ValueError(f"{value!r} is not an IPv4 CIDR; DigitalOcean VPCs and DOKS subnets are IPv4")
    return str(net)


def _private_cidr(value: str) -> str:
    value = _cidr(value)
    if not ipaddress.ip_network(value).is_private:
        raise ValueError(f"{value!r} is not a private (RFC 1918) range; use e.g. 10.20.0.0/20")
    return value


def _hf_id(value: str) -> str:
    if not _HF_ID.match(value) or ".." in value or value.endswith((".", "-")):
        raise ValueError(
            f"{value!r} is not a Hugging Face model id; expected <org>/<name>, e.g. Qwen/Qwen3-8B"
        )
    return value


def _commit_hash(value: str) -> str:
    if not _COMMIT_HASH.match(value):
        raise ValueError(
            f"{value!r} is not a commit hash; pin the checkpoint by its full 40-character commit id "
            "(shown in the model's 'Files and versions' history), not a branch or tag that can move"
        )
    return value


def _dns_label(value: str) -> str:
    if not _DNS_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a valid name; use lowercase letters, digits and '-', start with a letter, "
            "at most 40 characters"
        )
    return value


def _model_name(value: str) -> str:
    if clashes_with_service_env(value):
        raise ValueError(
            f"{value!r} is reserved: the model's Service takes its name, and Kubernetes turns a Service named "
            "`vllm` or `vllm-*` into VLLM_* env vars that clash with vLLM's own; choose another name"
        )
    return value


def _cpu_slug(value: str) -> str:
    if not _CPU_SLUG.match(value):
        close = difflib.get_close_matches(value, sorted(CPU_USD_PER_MONTH), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"{value!r} is not a CPU Droplet size slug{hint}; use e.g. s-4vcpu-8gb, g-4vcpu-16gb, c-8, "
            "m-2vcpu-16gb, optionally with -amd or -intel"
        )
    return value


def _vllm_env_name(name: str) -> str:
    if unknown_env_vars({name: ""}):
        close = difflib.get_close_matches(name, vllm_flags()["env_vars"], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"{name!r} is not read by vLLM {vllm_flags()['vllm_version']}{hint}; it would be silently ignored "
            "(known VLLM_* variables: infra/catalog/vllm_flags.json)"
        )
    return name


def _vllm_serve_flags(args: list[str]) -> list[str]:
    """Each unknown flag as its own error at its index: pydantic merges a ValidationError raised here
    into the stack file's, so it is reported with every other problem."""
    data = vllm_flags()
    errors = []
    index = 0
    for flag in unknown_flags(args):
        index = args.index(flag, index)
        close = difflib.get_close_matches(canonical_flag(flag), data["accepted"], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        message = (
            f"{flag!r} is not a `vllm serve` option in vLLM {data['vllm_version']}{hint}; "
            "accepted flags: infra/catalog/vllm_flags.json"
        )
        errors.append(
            InitErrorDetails(type=PydanticCustomError("value_error", "{message}", {"message": message}), loc=(index,), input=flag)
        )
        index += 1
    if errors:
        raise ValidationError.from_exception_data("extra_args", errors)
    return args


def _covers_slo_windows(value: str) -> str:
    if duration_days(value) < LONGEST_SLO_WINDOW_DAYS:
        raise ValueError(
            f"{value!r} is below the minimum of {LONGEST_SLO_WINDOW_DAYS}d: the slowest SLO burn-rate alert "
            f"reads {LONGEST_SLO_WINDOW_DAYS} days of history; use e.g. 15d"
        )
    return value


def _header_name(value: str) -> str:
    if not _HEADER.match(value):
        shown = value if len(value) <= 70 else value[:67] + "..."
        raise ValueError(
            f"{shown!r} is not an HTTP header name the router can key on; use letters, digits and '-' "
            "(1 to 64 characters), e.g. x-session-id"
        )
    return value


# Kubernetes label syntax (kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set):
# a key is an optional DNS-subdomain prefix (≤ 253) and `/`, then a name (≤ 63) of alphanumerics,
# '-', '_', '.', beginning and ending alphanumeric; a value is empty or the same as a name.
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
# Prefixes whose labels belong to someone else: Kubernetes itself (kubelet refuses most of them on
# nodes), DOKS (it manages doks.digitalocean.com/* on every node) and this program, whose pool and
# GPU labels the model pods select on.
RESERVED_LABEL_PREFIXES = ("kubernetes.io", "k8s.io", "doks.digitalocean.com", "inference-platform")


def _label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return "has more than one '/'; a label key is [prefix/]name"
    if not _LABEL_NAME.match(name):
        return (
            "is not a valid label name: at most 63 characters of letters, digits, '-', '_' and '.', "
            "beginning and ending with a letter or digit (optionally after a DNS prefix and '/')"
        )
    if key.startswith("/") or (prefix and (len(prefix) > 253 or not all(_DNS_SUBDOMAIN_LABEL.match(p) for p in prefix.split(".")))):
        return "has a prefix that is not a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)"
    for reserved in RESERVED_LABEL_PREFIXES:
        if prefix == reserved or prefix.endswith("." + reserved):
            return f"uses the reserved prefix {prefix}/ (reserved: {', '.join(p + '/' for p in RESERVED_LABEL_PREFIXES)}); choose your own prefix, e.g. example.com/team"
    return None


def _node_labels(labels: dict[str, str]) -> dict[str, str]:
    """Each bad key or value as its own error at its key, reported with every other problem."""
    errors = []
    for key, value in labels.items():
        problem = _label_key_problem(key)
        if problem is None and value and not _LABEL_NAME.match(value):
            shown = value if len(value) <= 70 else value[:67] + "..."
            problem = (
                f"value {shown!r} is not a valid label value: at most 63 characters of letters, digits, '-', '_' "
                "and '.', beginning and ending with a letter or digit (or empty)"
            )
        if problem is not None:
            message = f"label {key!r} {problem}" if not problem.startswith("value") else f"label {key!r}: {problem}"
            errors.append(
                InitErrorDetails(type=PydanticCustomError("value_error", "{message}", {"message": message}), loc=(key,), input=key)
            )
    if errors:
        raise ValidationError.from_exception_data("labels", errors)
    return labels


def _hhmm(value: str) -> str:
    if not _HHMM.match(value):
        raise ValueError(f"{value!r} is not a time of day; use HH:MM in UTC, e.g. 04:00")
    return value


def _k8s_prefix(value: str) -> str:
    if not (doks.VERSION_PREFIX.match(value) or doks.VERSION_SLUG.match(value)):
        raise ValueError(
            f"{value!r} is neither a Kubernetes version prefix (e.g. \"1.33\") nor an exact DOKS version "
            "slug (e.g. \"1.33.1-do.5\", as `doctl kubernetes options versions` lists)"
        )
    return value


def _auto_or_layout(value: Any) -> Any:
    if value == "auto" or value is None:
        return None
    if isinstance(value, str) and is_pd_layout_name(value):
        return {"disaggregated": value}
    if isinstance(value, str):
        raise ValueError(f"{value!r} is not a layout; use 'auto', a P/D layout name such as p1tp4-d1tp4, or a mapping such as {{tp: 4, ep: true, replicas_per_node: 2}}")
    if isinstance(value, dict) and "disaggregated" in value and "nodes_per_replica" in value:
        raise ValueError(
            f"nodes_per_replica {value['nodes_per_replica']!r} is for colocated layouts; a P/D layout such as "
            f"{value['disaggregated']!r} spans nodes by its own size (nodes_per_unit = its GPUs over the GPUs per node, on a "
            "fabric pool): remove nodes_per_replica"
        )
    return value


Region = Annotated[str, AfterValidator(_region)]
GpuSlug = Annotated[str, AfterValidator(_gpu_slug)]
Cidr = Annotated[str, AfterValidator(_cidr)]
PrivateCidr = Annotated[str, AfterValidator(_private_cidr)]
HfId = Annotated[str, AfterValidator(_hf_id)]
CommitHash = Annotated[str, AfterValidator(_commit_hash)]
Name = Annotated[str, AfterValidator(_dns_label)]
ModelName = Annotated[str, AfterValidator(_dns_label), AfterValidator(_model_name)]
CpuSlug = Annotated[str, AfterValidator(_cpu_slug)]
VllmEnvName = Annotated[str, AfterValidator(_vllm_env_name)]
VllmServeArgs = Annotated[list[str], AfterValidator(_vllm_serve_flags)]
Retention = Annotated[str, AfterValidator(_covers_slo_windows)]
TimeOfDay = Annotated[str, AfterValidator(_hhmm)]
HeaderName = Annotated[str, AfterValidator(_header_name)]
K8sPrefix = Annotated[str, AfterValidator(_k8s_prefix)]
NodeLabels = Annotated[dict[str, str], AfterValidator(_node_labels)]


class _Strict(BaseModel):
    # allow_inf_nan=False: `.inf` and `.nan` are YAML floats, and no key means either.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


# --------------------------------------------------------------------------- sections


class NetworkConfig(_Strict):
    """The environment's VPC and, optionally, VPC-native cluster subnets."""

    vpc_cidr: PrivateCidr = Field(description="IPv4 range of the VPC (RFC 1918), e.g. 10.20.0.0/20. Changing it replaces the VPC.")
    cluster_subnet: PrivateCidr | None = Field(None, description="Pod network for a VPC-native cluster; unset: DOKS default 10.244.0.0/16. Create-time only.")
    service_subnet: PrivateCidr | None = Field(None, description="Service network for a VPC-native cluster; unset: DOKS default 10.245.0.0/16. Create-time only.")


class SystemPoolConfig(_Strict):
    """The cluster's default node pool: CPU nodes for system workloads (router, Prometheus, operators)."""

    size: CpuSlug = Field(
        "s-4vcpu-8gb",
        description="CPU Droplet size slug, e.g. s-4vcpu-8gb, g-4vcpu-16gb, c-8. Changing it REPLACES THE CLUSTER (DOKS default pool); pick once.",
    )
    nodes: int = Field(2, ge=1, le=100, description="Node count of the system pool.")


class MaintenanceConfig(_Strict):
    """When DOKS may apply patch upgrades."""

    day: Literal["any", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"] = Field(
        "sunday", description="Day of the week for the maintenance window."
    )
    start_time: TimeOfDay = Field("04:00", description="Start of the window, HH:MM UTC.")


class ClusterConfig(_Strict):
    """The DOKS cluster. Unset booleans take the environment's defaults (prod: HA and protected)."""

    version: K8sPrefix = Field(
        "1.33",
        description=(
            "Kubernetes version: a prefix (1.33) picks the latest DOKS release at creation and is then ignored "
            "(auto_upgrade moves patches; otherwise the cluster stays on its version), or an exact DOKS slug "
            "(1.33.1-do.5) managed verbatim, so editing it upgrades the cluster (requires auto_upgrade: false; "
            "lowering it replaces the cluster)."
        ),
    )
    ha: bool | None = Field(None, description="Highly available control plane. Default: true in prod, false elsewhere.")
    protect: bool | None = Field(None, description="Pulumi `protect` on the cluster, node pools and weight cache. Default: true in prod.")
    auto_upgrade: bool = Field(
        True, description="Let DOKS apply patch upgrades in the maintenance window. Must be false with an exact version slug."
    )
    surge_upgrade: bool = Field(True, description="Upgrade by adding new nodes before draining old ones.")
    system_pool: SystemPoolConfig = Field(default_factory=SystemPoolConfig, description="The default (system) node pool.")
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig, description="Maintenance window.")
    control_plane_allowed_cidrs: list[Cidr] = Field(
        default_factory=list,
        description=(
            "Allow-list for the Kubernetes API (control-plane firewall); must include the machine running Pulumi "
            "(CI runner too). Empty: firewall explicitly off (API open to the internet, token-protected)."
        ),
    )
    kubeconfig_expire_seconds: int = Field(
        7 * 24 * 3600, ge=3600, le=7 * 24 * 3600, description="Lifetime of the kubeconfig token DOKS issues (1 h to 7 days)."
    )


class GpuPoolConfig(_Strict):
    """A GPU node pool. Either a fixed `nodes` count or an autoscaling `min_nodes`..`max_nodes` range."""

    name: Name = Field(description="Pool name (DOKS node-pool name and the `inference-platform/pool` label).")
    size: GpuSlug = Field(description="GPU Droplet size slug (see the GPU catalog). Changing it replaces the pool.")
    nodes: int | None = Field(
        None, ge=1, le=512, description="Fixed node count (≥ 1; to park a pool at zero nodes use min_nodes: 0). Mutually exclusive with min_nodes/max_nodes."
    )
    min_nodes: int | None = Field(
        None,
        ge=0,
        le=512,
        description="Autoscaling lower bound. 0 parks the pool: its models get 0 replicas and serve nothing (autoscaling cannot start from zero).",
    )
    max_nodes: int | None = Field(None, ge=1, le=512, description="Autoscaling upper bound.")
    partition_mode: Literal["AMD_PARTITION_MODE_SPX_NPS1", "AMD_PARTITION_MODE_DPX_NPS2"] | None = Field(
        None, description="AMD compute/memory partition mode; create-time only (a change replaces the pool)."
    )
    usd_per_hour: float | None = Field(
        None, gt=0, description="Price per node-hour. Required for cost figures on contract-only sizes; overrides the catalog price."
    )
    fabric: bool = Field(
        False,
        description="The pool's nodes are on DigitalOcean's RDMA GPU fabric (a -fabric- size): P/D units and replicas may span nodes, KV and collectives move over RDMA. Only for fabric sizes.",
    )
    labels: NodeLabels = Field(
        default_factory=dict,
        description="Extra Kubernetes node labels (Kubernetes label syntax; prefixes kubernetes.io/, k8s.io/, doks.digitalocean.com/ and inference-platform/ are reserved).",
    )

    @property
    def autoscale(self) -> bool:
        return self.nodes is None

    @property
    def min_node_count(self) -> int:
        return self.nodes if self.nodes is not None else (self.min_nodes or 0)

    @property
    def max_node_count(self) -> int:
        return self.nodes if self.nodes is not None else (self.max_nodes or 0)

    @property
    def gpu(self) -> GpuSize:
        return GPU_SIZES[self.size]

    @property
    def node_usd_per_hour(self) -> float | None:
        return self.usd_per_hour if self.usd_per_hour is not None else self.gpu.usd_per_hour


class GpuRuntimeConfig(_Strict):
    """How GPUs are exposed to Kubernetes on AMD pools."""

    mode: Literal["doks-managed", "device-plugin", "gpu-operator"] = Field(
        "doks-managed",
        description="doks-managed: the DOKS cluster flag installs ROCm/k8s-device-plugin; device-plugin: our own pinned DaemonSets; gpu-operator: AMD GPU Operator (Helm) with cert-manager.",
    )
    disable_numa_balancing: bool = Field(True, description="Run a DaemonSet on AMD GPU nodes that sets kernel.numa_balancing=0 (AMD's vLLM guidance).")


class ModelCacheConfig(_Strict):
    """Where replicas load weights from: a DO NFS share, a DO Spaces bucket, or Hugging Face itself.

    nfs: a Network File Storage share in the VPC, filled once by a prefetch Job, read by every
    replica (and home of the shared compile cache). spaces: a Spaces bucket (S3-compatible),
    filled once by the prefetch Job and streamed straight into GPU memory by vLLM's Run:ai Model
    Streamer (`--load-format runai_streamer`); compile caches stay on each node's disk. none: each
    pod downloads from Hugging Face to its scratch disk. docs/cold-start.md compares them.
    """

    kind: Literal["nfs", "spaces", "none"] = Field(
        "nfs",
        description="nfs: DO Network File Storage share; spaces: DO Spaces bucket streamed into GPU memory; none: each pod downloads from Hugging Face to local scratch.",
    )
    size_gib: int = Field(1024, ge=50, le=16384, description="nfs: share size in GiB (≥ 50; it can grow, never shrink).")
    tier: Literal["standard", "high"] = Field("high", description="nfs: NFS performance tier.")
    bucket: str | None = Field(
        None,
        description="spaces (required): bucket name, unique across Spaces; 3–63 lowercase letters, digits and '-', starting and ending with a letter or digit.",
    )
    region: str | None = Field(
        None,
        description="spaces: region of the bucket (a region with Spaces, e.g. nyc3 for a cluster in nyc2); default: the stack's region.",
    )
    prefix: str = Field(
        "models",
        description="spaces: key prefix under which the prefetch stores each checkpoint, as <prefix>/<org>/<name>/<revision or main>/.",
    )
    streamer_concurrency: int = Field(
        16, ge=1, le=64,
        description="spaces: Run:ai streamer reader threads per vLLM process (each GPU rank of a replica streams its share with this many).",
    )


class LayoutConfig(_Strict):
    """An explicit serving layout (instead of `auto`). Checked against the model and the node."""

    tp: int = Field(ge=1, le=64, description="Tensor-parallel size of one vLLM replica.")
    ep: bool = Field(False, description="Expert parallelism (MoE models only).")
    dp: int = Field(1, ge=1, le=64, description="Data-parallel attention ranks inside one replica.")
    replicas_per_node: int = Field(1, ge=1, le=64, description="Independent vLLM replicas per node.")
    nodes_per_replica: int = Field(
        1, ge=1, le=64,
        description="Whole nodes one replica spans (fabric pools only; rendered as a LeaderWorkerSet): with ep, tp × dp = nodes_per_replica × GPUs per node with the dp ranks spread over the nodes; without ep, tp = nodes_per_replica × GPUs per node. replicas_per_node must then be 1.",
    )
    max_num_seqs: int | None = Field(None, ge=1, le=4096, description="vLLM --max-num-seqs; unset: the planner's choice.")
    max_num_batched_tokens: int | None = Field(None, ge=256, le=262144, description="vLLM --max-num-batched-tokens; unset: the planner's choice.")
    gpu_memory_utilization: float = Field(0.90, gt=0.3, le=0.98, description="vLLM --gpu-memory-utilization.")
    kv_cache_dtype: Literal["auto", "fp8"] = Field("auto", description="vLLM --kv-cache-dtype.")
    max_model_len: int | None = Field(None, ge=256, le=1048576, description="vLLM --max-model-len; unset: twice input+output tokens rounded up to a power of two, at least 4096, at most the model's context.")
    provenance: Provenance | None = Field(None, description="Where a measured layout came from (written by `infra tune ingest --write`); its `measured_goodput_rps` sizes the pool.")

    def to_layout(self, gpus_per_node: int | None = None) -> Layout:
        """The planner's Layout (`gpus_per_node` is for P/D layouts; a colocated one needs none)."""
        base = Layout()
        return Layout(
            tp=self.tp,
            ep=self.ep,
            dp=self.dp,
            replicas_per_node=self.replicas_per_node,
            nodes_per_replica=self.nodes_per_replica,
            max_num_seqs=self.max_num_seqs or base.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens or base.max_num_batched_tokens,
            gpu_memory_utilization=self.gpu_memory_utilization,
            kv_cache_dtype=self.kv_cache_dtype,
            max_model_len=self.max_model_len,
        )


def _pd_name(value: str) -> str:
    parse_pd_layout_name(value)  # ValueError names the grammar
    return value


class PdLayoutConfig(_Strict):
    """A prefill/decode-disaggregated layout: `layout: p1tp4-d1tp4`, or this mapping for its limits.

    N prefill engines of TP A and M decode engines of TP B per unit, joined by the GPU vendor's KV
    connector (MoRI-IO on AMD, NIXL on NVIDIA) behind a per-model P/D router (docs/serving.md).
    """

    disaggregated: Annotated[str, AfterValidator(_pd_name)] = Field(
        description="P/D layout name p<N>tp<A>[-ep]-d<M>tp<B>[-ep], e.g. p1tp4-d1tp4 (1 prefill engine of TP4, 1 decode engine of TP4)."
    )
    decode_max_num_seqs: int | None = Field(None, ge=1, le=4096, description="vLLM --max-num-seqs of each decode engine; unset: the planner's choice.")
    prefill_max_num_batched_tokens: int | None = Field(None, ge=256, le=262144, description="vLLM --max-num-batched-tokens of each prefill engine; unset: 8192.")
    gpu_memory_utilization: float = Field(0.90, gt=0.3, le=0.98, description="vLLM --gpu-memory-utilization of every engine.")
    kv_cache_dtype: Literal["auto", "fp8"] = Field("auto", description="vLLM --kv-cache-dtype of every engine (and the KV moved between them).")
    max_model_len: int | None = Field(None, ge=256, le=1048576, description="vLLM --max-model-len; unset: as for colocated layouts.")
    provenance: Provenance | None = Field(None, description="Where a measured P/D layout came from; its `measured_goodput_rps` sizes the pool.")

    def to_layout(self, gpus_per_node: int | None = None) -> PdLayout:
        base = PdLayout()
        return PdLayout(
            **parse_pd_layout_name(self.disaggregated),
            gpus_per_node=gpus_per_node or base.gpus_per_node,
            prefill_max_num_batched_tokens=self.prefill_max_num_batched_tokens or base.prefill_max_num_batched_tokens,
            decode_max_num_seqs=self.decode_max_num_seqs or base.decode_max_num_seqs,
            gpu_memory_utilization=self.gpu_memory_utilization,
            kv_cache_dtype=self.kv_cache_dtype,
            max_model_len=self.max_model_len,
        )


def _layout_kind(value: Any) -> str:
    """Which mapping a `layout:` is: a P/D one names `disaggregated`, any other is colocated (so a
    typo in a colocated mapping gets the colocated errors only, not both forms')."""
    if isinstance(value, PdLayoutConfig) or (isinstance(value, dict) and "disaggregated" in value):
        return _PD_TAG
    return _COLOCATED_TAG


_PD_TAG, _COLOCATED_TAG = "disaggregated-layout", "colocated-layout"
_LAYOUT_TAGS = (_PD_TAG, _COLOCATED_TAG)
_AnyLayout = Annotated[
    Annotated[LayoutConfig, Tag(_COLOCATED_TAG)] | Annotated[PdLayoutConfig, Tag(_PD_TAG)], Discriminator(_layout_kind)
]


class WorkloadConfig(_Strict):
    """The traffic a model serves: it drives the planner."""

    input_tokens: int = Field(
        ge=1, le=MAX_INPUT_TOKENS, description="Typical prompt length in tokens; input + output must fit the model's context."
    )
    output_tokens: int = Field(ge=1, le=MAX_OUTPUT_TOKENS, description="Typical completion length in tokens.")
    peak_rps: float | None = Field(
        None, gt=0, le=MAX_PEAK_RPS, description="Peak requests per second the model must sustain (sizes the node count)."
    )
    prefix_cache_hit_rate: float = Field(
        0.0, ge=0, lt=1,
        description="Share of prompt tokens expected from the prefix cache, taken as given; with turns_per_session the session model predicts it instead (set one, not both).",
    )
    turns_per_session: int = Field(
        1, ge=1, le=MAX_TURNS_PER_SESSION,
        description="Turns per conversation (multi-turn chat): each prompt re-sends the history, which the prefix cache serves while it holds it; the plan then predicts the hit rate from the KV cache and the sessions (docs/planner.md). 1: single prompts.",
    )
    think_time_s: float = Field(
        60.0, gt=0, le=86400,
        description="Mean seconds between a conversation's turns (the user reading and typing); longer: more histories evicted before they are reused.",
    )
    new_tokens_per_turn: int | None = Field(
        None, ge=1, le=MAX_INPUT_TOKENS,
        description="New user tokens per turn; unset: derived so the mean prompt over a session is input_tokens.",
    )

    def to_workload(self) -> Workload:
        return Workload(
            self.input_tokens, self.output_tokens, self.peak_rps, self.prefix_cache_hit_rate,
            self.turns_per_session, self.think_time_s, self.new_tokens_per_turn,
        )


class KvOffloadConfig(_Strict):
    """A second KV-cache tier in host memory (vLLM `--kv-offloading-backend`/`--kv-offloading-size`).

    Multi-turn chat re-sends its history every turn; the GPU prefix cache serves it only while it
    holds it. An offload tier keeps evicted blocks in the node's RAM and reloads them over PCIe
    instead of re-prefilling. The plan shows hit rate and goodput with and without it.
    """

    kind: Literal["none", "auto", "cpu", "lmcache"] = Field(
        "none",
        description="none; auto: the planner turns a CPU tier on where it raises goodput by 5 % or more (needs workload.turns_per_session); cpu: vLLM's native OffloadingConnector; lmcache: LMCache's CPU tier (needs an image with LMCache: the upstream ROCm image is built without it).",
    )
    size_gib: float | None = Field(
        None, gt=0, le=65536, allow_inf_nan=False,
        description="cpu / lmcache (required): host memory per engine (vLLM's --kv-offloading-size, shared by its TP ranks; a replica with dp ranks pins it dp times); must fit the engine pod's share of the node's RAM beside the engine itself.",
    )

    def to_offload(self) -> KvOffload | None:
        return KvOffload(self.kind, float(self.size_gib)) if self.kind in ("cpu", "lmcache") and self.size_gib else None


class SloConfig(_Strict):
    """Latency objectives at the 90th percentile."""

    ttft_p90_ms: float = Field(gt=0, le=MAX_TTFT_P90_MS, description="p90 time to first token, ms.")
    tpot_p90_ms: float = Field(gt=0, le=MAX_TPOT_P90_MS, description="p90 time per output token, ms.")

    def to_slo(self) -> Slo:
        return Slo(self.ttft_p90_ms, self.tpot_p90_ms)


class AutoscalingConfig(_Strict):
    """Replica autoscaling (KEDA) of a model on an autoscaling GPU pool, on in-flight load and the queue.

    Pods scale on requests in flight per replica (and on the queue); pending pods make the DOKS
    autoscaler add GPU nodes. Without it an autoscaling pool never grows: nothing asks for a pod
    beyond the minimum. vLLM's metrics exist only while a vLLM pod runs, so a pool with min_nodes 0
    can never be scaled up from nothing.
    """

    enabled: bool | None = Field(
        None,
        description="Default: on when the model's pool autoscales (1 ≤ min_nodes < max_nodes), serves only this model, and observability is on; off for a P/D layout whose unit spans nodes (not autoscaled). A P/D unit within one node scales its prefill and decode Deployments apart (one ScaledObject each). A replica over nodes (nodes_per_replica > 1) scales in whole LeaderWorkerSet groups.",
    )
    target_running_per_replica: int | None = Field(
        None, gt=0,
        description="Target requests in flight (vllm:num_requests_running + num_requests_waiting) per replica, the primary scaling signal; above it replicas are added, below it removed. Unset: 0.8 × the running requests per replica at the plan's SLO goodput (`infra plan` shows it). Set it from measurements (`infra tune`); at most max_num_seqs × dp of the layout.",
    )
    waiting_per_replica: float = Field(
        4.0, gt=0, le=1000,
        description="Target queued requests (vllm:num_requests_waiting) per replica, the second trigger (the larger wins): adds replicas when a queue builds even below the in-flight target, up to replicas_per_node × max_nodes (max_nodes / nodes_per_replica for a replica over nodes).",
    )
    scale_down_delay_seconds: int = Field(
        1800, ge=300, le=86400,
        description="How long the load must stay below target before a replica is removed (a GPU replica takes tens of minutes to come back).",
    )


def _offload_kind(value: Any) -> Any:
    """`kv_offload: auto` (or none) as a string is short for `{kind: auto}`."""
    return {"kind": value} if isinstance(value, str) else value


class ModelConfig(_Strict):
    """One served model: what, where, how laid out, for which traffic and SLOs."""

    name: ModelName = Field(description="Service name of the model (Kubernetes names, labels, metrics); not `vllm` or `vllm-*`.")
    source: HfId = Field(description="Hugging Face model id, e.g. Qwen/Qwen3-235B-A22B-Instruct-2507-FP8.")
    revision: CommitHash | None = Field(
        None,
        description="Pin the checkpoint to one Hugging Face commit (40 hex characters): the prefetch, vLLM's weights and tokenizer all use it. Unset: `main` as of the first prefetch.",
    )
    pool: Name = Field(description="Name of the GPU pool that serves it.")
    layout: Annotated[_AnyLayout | None, BeforeValidator(_auto_or_layout)] = Field(
        None, description="'auto' (the planner chooses), an explicit layout mapping, or a prefill/decode layout (p1tp4-d1tp4 or {disaggregated: p1tp4-d1tp4, ...})."
    )
    workload: WorkloadConfig = Field(description="Traffic shape.")
    slo: SloConfig = Field(description="p90 latency objectives.")
    served_model_name: str | None = Field(None, description="Name clients use in the OpenAI API; default: the source id.")
    hf_config: str | None = Field(None, description="Path (relative to the repo) to a local Hugging Face config.json for models not in the catalog.")
    image: str | None = Field(None, description="Override the pinned vLLM image (must carry an explicit tag).")
    extra_args: VllmServeArgs = Field(
        default_factory=list, description="Extra `vllm serve` arguments, appended verbatim; each flag must exist in the pinned vLLM."
    )
    env: dict[VllmEnvName, str] = Field(
        default_factory=dict, description="Extra container environment variables; VLLM_* names must be read by the pinned vLLM."
    )
    autoscaling: AutoscalingConfig = Field(default_factory=AutoscalingConfig, description="Replica autoscaling on in-flight requests and the queue (KEDA).")
    kv_offload: Annotated[KvOffloadConfig, BeforeValidator(_offload_kind)] = Field(
        default_factory=KvOffloadConfig,
        description="KV cache offload tier in host memory: none, auto, or {kind: cpu|lmcache, size_gib: N}.",
    )

    @property
    def api_model_name(self) -> str:
        return self.served_model_name or self.source


class GatewayObjectiveConfig(_Strict):
    """An InferenceObjective: a priority the endpoint picker gives the requests that name it."""

    name: Name = Field(description="Objective name; clients send it in the `x-llm-d-inference-objective` header.")
    model: Name = Field(description="The model (models[].name) whose pool the objective belongs to.")
    priority: int = Field(
        ge=-(2**31),
        le=2**31 - 1,
        description="Higher is served first; below 0 the request is sheddable (dropped while the pool is saturated). Unset objective: 0.",
    )


class GatewayConfig(_Strict):
    """`router.kind: gateway`: one Agentgateway gateway (Gateway API + Inference Extension) for every
    model, with an llm-d endpoint picker per model choosing the engine (docs/serving.md)."""

    routing: Literal["prefix", "session"] = Field(
        "prefix",
        description="Scorer preset of the endpoint pickers: prefix = prefix-cache 3, queue 2, kv-cache-utilization 2 (llm-d's defaults); session = those plus session-affinity 2 on router.session_header (an alpha plugin).",
    )
    scorers: dict[str, float] | None = Field(
        None,
        description="Explicit scorer weights instead of the preset, e.g. {prefix-cache-scorer: 3, queue-scorer: 2}; names from infra/catalog/epp.py, weights > 0 and ≤ 100.",
    )
    failure_mode: Literal["open", "close"] = Field(
        "open",
        description="When a model's endpoint picker is unavailable: open = the gateway still forwards to one of the model's engines (no scoring); close = requests fail.",
    )
    authentication: Literal["api-key", "none"] = Field(
        "api-key",
        description="api-key: the gateway checks `Authorization: Bearer <api_key secret>` before routing (required when router.public); none: it checks nothing (internal gateways only).",
    )
    objectives: list[GatewayObjectiveConfig] = Field(
        default_factory=list, description="Optional InferenceObjectives (priorities), each for one model, e.g. interactive vs batch."
    )
    install_gateway_api_crds: bool | None = Field(
        None,
        description="Install the Gateway API CRDs (standard channel, pinned). Default: false on VPC-native clusters (network.cluster_subnet set), where DOKS manages them, true elsewhere.",
    )


class RouterConfig(_Strict):
    """The one request router in front of every model of the environment."""

    kind: Literal["service", "session", "prefix", "round-robin", "gateway"] = Field(
        "session",
        description=(
            "service: clients use each model's ClusterIP Service (kube-proxy balancing); session/prefix/round-robin: "
            "one vLLM router (vllm-router 0.1.17) for all models, routing by the request's `model` with policy "
            "consistent_hash on x-session-id / cache_aware / round_robin; gateway: one Gateway API gateway with an "
            "endpoint picker per model (router.gateway)."
        ),
    )
    session_header: HeaderName = Field(
        "x-session-id",
        description=(
            "HTTP header that pins a conversation to a replica (kind: session). vllm-router hashes x-session-id "
            "and has no flag to rename it: only x-session-id is accepted."
        ),
    )
    replicas: int = Field(2, ge=1, le=20, description="Router replicas (kind gateway: gateway proxy replicas); a PodDisruptionBudget keeps one up.")
    public: bool = Field(False, description="Expose through one DigitalOcean LoadBalancer (requires the api_key secret).")
    tls_certificate_id: str | None = Field(None, description="DO certificate id for TLS termination on the LoadBalancer.")
    allowed_source_cidrs: list[Cidr] = Field(default_factory=list, description="LoadBalancer source allow-list; empty: open.")
    image: str | None = Field(
        None,
        description=(
            "An image with vllm-router 0.1.17 on PATH (build images/vllm-router/Dockerfile; explicit tag, not latest). "
            "Default: the pinned Python image installs the hash-locked wheels in an initContainer."
        ),
    )
    gateway: GatewayConfig = Field(default_factory=GatewayConfig, description="The gateway of router.kind gateway.")


class AlertReceiverConfig(_Strict):
    """Where Alertmanager sends alerts."""

    kind: Literal["none", "slack", "webhook"] = Field("none", description="none, or slack/webhook with the alert_webhook_url secret.")
    channel: str | None = Field(None, description="Slack channel (kind: slack).")


class ObservabilityConfig(_Strict):
    """Prometheus, Grafana, Alertmanager, SLO rules and dashboards."""

    enabled: bool | None = Field(None, description="Default: true in staging and prod, false in dev.")
    retention: Retention = Field(
        "15d", description=f"Prometheus retention, e.g. 15d; at least {LONGEST_SLO_WINDOW_DAYS}d (the longest SLO burn-rate window)."
    )
    storage_gib: int = Field(100, ge=10, le=16384, description="Prometheus volume size (do-block-storage).")
    alert_receiver: AlertReceiverConfig = Field(default_factory=AlertReceiverConfig, description="Alert destination.")
    runbook_url: str = Field(
        "docs/runbook.md",
        description="Base of the runbook links in alerts; set it to the runbook's web address, e.g. https://github.com/<org>/<repo>/blob/main/docs/runbook.md.",
    )


class StackInput(_Strict):
    """All `inference-platform:*` keys of a stack file (secrets excluded)."""

    environment: Literal["dev", "staging", "prod"] = Field(description="Environment; drives safe defaults (prod: HA, protect, observability).")
    region: Region = Field(description="DigitalOcean region slug, e.g. atl1.")
    network: NetworkConfig = Field(description="VPC and cluster networks.")
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="DOKS cluster.")
    gpu_pools: list[GpuPoolConfig] = Field(min_length=1, description="GPU node pools.")
    gpu_runtime: GpuRuntimeConfig = Field(default_factory=GpuRuntimeConfig, description="AMD GPU runtime (device plugin).")
    model_cache: ModelCacheConfig = Field(default_factory=ModelCacheConfig, description="Shared weight cache.")
    models: list[ModelConfig] = Field(default_factory=list, description="Served models.")
    router: RouterConfig = Field(default_factory=RouterConfig, description="Request router.")
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig, description="Monitoring and alerting.")


# --------------------------------------------------------------------------- the validated result


class StackConfig(BaseModel):
    """A validated stack: the input with environment defaults applied, plus what the program needs."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    stack: str
    environment: Literal["dev", "staging", "prod"]
    region: str
    network: NetworkConfig
    cluster: ClusterConfig  # ha/protect resolved (never None)
    gpu_pools: list[GpuPoolConfig]
    gpu_runtime: GpuRuntimeConfig
    model_cache: ModelCacheConfig
    models: list[ModelConfig]  # autoscaling.enabled resolved (never None)
    router: RouterConfig
    observability: ObservabilityConfig  # enabled resolved (never None)
    secrets_set: frozenset[str]  # secret keys that are set (as secrets)
    secrets_required: tuple[str, ...]  # secret keys this stack needs for `pulumi up`
    base_dir: Path | None = None  # the project root that relative paths (hf_config) start from
    spaces_credentials_set: bool = False  # digitalocean:spacesAccessId and spacesSecretKey are in the stack file

    @property
    def spaces_region(self) -> str:
        """The region of the Spaces weight bucket (model_cache.region, else the stack's)."""
        return self.model_cache.region or self.region

    @property
    def protect(self) -> bool:
        return bool(self.cluster.protect)

    def pool(self, name: str) -> GpuPoolConfig:
        return next(p for p in self.gpu_pools if p.name == name)

    @property
    def missing_secrets(self) -> list[str]:
        return [k for k in self.secrets_required if k not in self.secrets_set]

    def hf_config_path(self, model: ModelConfig) -> Path | None:
        """A model's `hf_config`, relative paths taken from the project root."""
        return _hf_config_path(model, self.base_dir)


def _hf_config_path(model: ModelConfig, base_dir: Path | None) -> Path | None:
    if not model.hf_config:
        return None
    path = Path(model.hf_config)
    return base_dir / path if not path.is_absolute() and base_dir is not None else path


# --------------------------------------------------------------------------- loading


def _path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if part == "[key]" or part in _LAYOUT_TAGS:
            continue  # pydantic's marker for a bad mapping key / the layout form chosen: not a key
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The pydantic model that owns the key at `loc` (for listing allowed keys)."""
    model: Any = StackInput
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        if part in _LAYOUT_TAGS:
            model = PdLayoutConfig if part == _PD_TAG else LayoutConfig
            continue
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        model = _inner_model(field.annotation)
        if model is None:
            return None
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    meta = getattr(annotation, "__origin__", None)
    if meta is not None and isinstance(meta, type) and issubclass(meta, BaseModel):
        return meta
    return None


_TYPE_NAMES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


_RANGE_ERRORS = {
    "greater_than": "greater than",
    "greater_than_equal": "at least",
    "less_than": "less than",
    "less_than_equal": "at most",
}


def _number_text(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _yaml_float(value: str) -> str:
    """`1e308` as YAML 1.1 reads it as a float: `1.0e+308`."""
    m = re.match(r"^\s*([+-]?[0-9]+)(?:\.([0-9]*))?[eE]([+-]?)([0-9]+)\s*$", value)
    if not m:
        return value.strip()
    return f"{m[1]}.{m[2] or '0'}e{m[3] or '+'}{m[4]}"


def _problem_from_pydantic(err: dict) -> Problem:
    loc = tuple(err["loc"])
    path = NS + _path(loc)
    kind = err["type"]
    value = err.get("input")
    if kind == "extra_forbidden":
        owner = _model_at(loc)
        allowed = ", ".join(owner.model_fields) if owner else "see docs/configuration.md"
        close = difflib.get_close_matches(str(loc[-1]).lower(), list(owner.model_fields) if owner else [], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return Problem(path, f"unknown key{hint}; allowed keys: {allowed}")
    if kind == "missing":
        return Problem(path, "required key is missing")
    if kind in ("float_type", "int_type") and isinstance(value, str) and _number_text(value):
        # YAML 1.1 (PyYAML, Pulumi) reads `1e308` and `5e3` as text: a float needs a dot and a signed exponent.
        return Problem(
            path,
            f"{value!r} is text, not a number: YAML reads an exponent without a dot as a string; write "
            f"{_yaml_float(value)} or a plain number (and unquoted)",
        )
    if kind == "finite_number":
        return Problem(path, f"{value!r} is not a finite number; give a real figure (.inf and .nan are not allowed)")
    if kind == "string_type" and isinstance(value, int | float) and not isinstance(value, bool):
        # `version: 1.30` is the number 1.3 to YAML: a string that looks like a number needs quotes.
        return Problem(path, f"{value!r} has the wrong type; expected a string: write it in quotes (\"{value}\")")
    if kind in _TYPE_NAMES:
        return Problem(path, f"{value!r} has the wrong type; expected {_TYPE_NAMES[kind]}")
    if kind in _RANGE_ERRORS:
        bound = next(iter(err.get("ctx", {}).values()), None)
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        return Problem(path, f"{value!r} is out of range; it must be {_RANGE_ERRORS[kind]} {bound}")
    if kind == "value_error":
        msg = str(err["msg"]).removeprefix("Value error, ")
        return Problem(path, msg)
    if kind in ("literal_error", "enum"):
        expected = err.get("ctx", {}).get("expected", "")
        return Problem(path, f"{value!r} is not allowed; allowed: {expected}")
    return Problem(path, f"{value!r}: {err['msg']}")


def _environment_defaults(raw: StackInput) -> tuple[ClusterConfig, ObservabilityConfig]:
    prod = raw.environment == "prod"
    cluster = raw.cluster.model_copy(
        update={
            "ha": prod if raw.cluster.ha is None else raw.cluster.ha,
            "protect": prod if raw.cluster.protect is None else raw.cluster.protect,
        }
    )
    obs = raw.observability.model_copy(update={"enabled": _observability_on(raw)})
    return cluster, obs


def _overlaps(named: list[tuple[str, str]]) -> list[Problem]:
    problems = []
    for i, (path_a, a) in enumerate(named):
        for path_b, b in named[i + 1 :]:
            if ipaddress.ip_network(a).overlaps(ipaddress.ip_network(b)):
                problems.append(Problem(NS + path_b, f"{b} overlaps {NS}{path_a} ({a}); the ranges must be disjoint"))
    return problems


def _check_network(raw: StackInput) -> list[Problem]:
    net = raw.network
    named = [("network.vpc_cidr", net.vpc_cidr)]
    named.append(("network.cluster_subnet", net.cluster_subnet or doks.DEFAULT_CLUSTER_SUBNET))
    named.append(("network.service_subnet", net.service_subnet or doks.DEFAULT_SERVICE_SUBNET))
    problems = []
    prefix = ipaddress.ip_network(net.vpc_cidr).prefixlen
    if not 16 <= prefix <= 28:
        problems.append(Problem(NS + "network.vpc_cidr", f"{net.vpc_cidr} has prefix /{prefix}; DigitalOcean VPCs must be /16 to /28"))
    if (net.cluster_subnet is None) != (net.service_subnet is None):
        problems.append(Problem(NS + "network", "set both cluster_subnet and service_subnet (VPC-native cluster) or neither"))
    for p in _overlaps(named):
        if "vpc_cidr" in p.message and (net.cluster_subnet is None):
            p = Problem(p.path, p.message + " (the DOKS default subnet; choose another vpc_cidr or set custom subnets)")
        problems.append(p)
    return problems


def _duplicates(items: list, attr: str, section: str, consequence: str = "") -> list[Problem]:
    seen: dict[str, int] = {}
    problems = []
    for i, item in enumerate(items):
        value = getattr(item, attr)
        if value in seen:
            problems.append(Problem(f"{NS}{section}[{i}].{attr}", f"{value!r} duplicates {section}[{seen[value]}]; names must be unique{consequence}"))
        else:
            seen[value] = i
    return problems


def pins_in_use(raw: StackInput) -> list[str]:
    """The pinned charts and images this stack deploys (infra/catalog/support_matrix.yaml names)."""
    pins = []
    if any(p.gpu.vendor == "amd" for p in raw.gpu_pools):
        pins.append("vllm-rocm")
        if raw.gpu_runtime.mode == "device-plugin":
            pins += ["rocm-device-plugin", "rocm-node-labeller"]
        elif raw.gpu_runtime.mode == "gpu-operator":
            pins += ["amd-gpu-operator", "cert-manager"]
    if any(p.gpu.vendor == "nvidia" for p in raw.gpu_pools):
        pins.append("vllm-cuda")
    if _observability_on(raw):
        pins.append("kube-prometheus-stack")
        names = [p.name for p in raw.gpu_pools]
        if len(set(names)) == len(names) and all(m.pool in names for m in raw.models):
            if any(m.autoscaling.enabled for m in _resolve_autoscaling(raw)):
                pins.append("keda")
    if raw.router.kind == "gateway":
        pins += ["agentgateway", "gateway-api-inference-extension", "llm-d-router-epp"]
        if install_gateway_api_crds(raw.router.gateway, raw.network):
            pins.append("gateway-api")
    elif raw.router.kind != "service":
        pins.append("router")
    return pins


def _check_cluster(raw: StackInput) -> list[Problem]:
    """A Kubernetes minor outside what a pin the stack deploys supports; and an exact version with
    auto-upgrade: DOKS moves the patch past the slug, and the next `pulumi up` would plan the slug
    again, a downgrade, which replaces the cluster."""
    version = raw.cluster.version
    problems = [
        Problem(
            f"{NS}cluster.version",
            f"{version!r}: the pinned {pin} supports Kubernetes {supported} only ({source.split(' @')[0].strip()}); "
            f"use a supported minor or move the {pin} pin in infra/catalog/versions.py",
        )
        for pin, supported, source in unsupported_pins(doks.kubernetes_minor(version), pins=pins_in_use(raw))
    ]
    if doks.VERSION_SLUG.match(version) and raw.cluster.auto_upgrade:
        problems.append(
            Problem(
                f"{NS}cluster.version",
                f"{version!r} is an exact DOKS version, which requires cluster.auto_upgrade: false (DOKS would "
                "upgrade past it and the next `pulumi up` would plan a downgrade, i.e. a cluster replacement); "
                "set auto_upgrade: false, or give a prefix such as \"1.33\"",
            )
        )
    return problems


# --- router.gateway (the llm-d request path; issue 17) ----------------------------------------

# Object names the gateway renders per model (infra/render/epp.py): `<model>-epp` must not be
# another model's name, whose Service, Deployment and labels it would collide with.
_EPP_SUFFIX = "-epp"


def install_gateway_api_crds(gateway: GatewayConfig, network: NetworkConfig) -> bool:
    """Whether the platform installs the Gateway API CRDs: DOKS manages them itself on VPC-native
    clusters (docs.digitalocean.com/products/kubernetes/how-to/use-gateway-api: enabled by default
    on VPC-native clusters from 1.33), so by default only elsewhere."""
    if gateway.install_gateway_api_crds is not None:
        return gateway.install_gateway_api_crds
    return network.cluster_subnet is None


def _check_gateway(raw: StackInput) -> list[Problem]:
    """`router.gateway` is read only by kind gateway; scorer names are the EPP's; a public gateway
    checks API keys; objectives name a model; no model is named like another's endpoint picker."""
    from infra.catalog.epp import MAX_WEIGHT, SCORERS  # local import: keeps the catalog out of config's top

    at = f"{NS}router.gateway"
    gw = raw.router.gateway
    if raw.router.kind != "gateway":
        return [Problem(f"{at}.{key}", f"applies only with router.kind gateway (kind is {raw.router.kind!r})") for key in sorted(gw.model_fields_set)]
    problems = []
    for name, weight in (gw.scorers or {}).items():
        if name not in SCORERS:
            close = difflib.get_close_matches(name, list(SCORERS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(
                Problem(
                    f"{at}.scorers.{name}",
                    f"{name!r} is not a scorer of the pinned endpoint picker (llm-d-router {versions.LLM_D_ROUTER_VERSION}){hint}; "
                    f"allowed: {', '.join(SCORERS)} (infra/catalog/epp.py)",
                )
            )
        elif not 0 < weight <= MAX_WEIGHT:
            problems.append(Problem(f"{at}.scorers.{name}", f"{weight!r} is out of range; a weight must be greater than 0 and at most {MAX_WEIGHT:g}"))
    if gw.scorers is not None and not gw.scorers:
        problems.append(Problem(f"{at}.scorers", "is empty; name at least one scorer, or leave it unset for the routing preset"))
    if gw.scorers is not None and "routing" in gw.model_fields_set:
        problems.append(Problem(f"{at}.routing", "is ignored when router.gateway.scorers is given; set one of them"))
    if raw.router.public and gw.authentication == "none":
        problems.append(
            Problem(
                f"{at}.authentication",
                "'none' on a public endpoint (router.public: true) would let anyone on the internet use the GPUs; "
                "use api-key (with the api_key secret), or make the gateway internal",
            )
        )
    names = {m.name: i for i, m in enumerate(raw.models)}
    for i, model in enumerate(raw.models):
        if model.name.endswith(_EPP_SUFFIX) and model.name.removesuffix(_EPP_SUFFIX) in names:
            other = names[model.name.removesuffix(_EPP_SUFFIX)]
            problems.append(
                Problem(
                    f"{NS}models[{i}].name",
                    f"{model.name!r} is the name of the endpoint picker of models[{other}] under router.kind gateway; choose another name",
                )
            )
    seen: dict[str, int] = {}
    for j, objective in enumerate(gw.objectives):
        where = f"{at}.objectives[{j}]"
        if objective.model not in names:
            close = difflib.get_close_matches(objective.model, list(names), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(Problem(f"{where}.model", f"{objective.model!r} is not a model{hint}; models: {', '.join(names) or 'none'}"))
        if objective.name in seen:
            problems.append(Problem(f"{where}.name", f"{objective.name!r} duplicates objectives[{seen[objective.name]}]; objective names must be unique"))
        seen.setdefault(objective.name, j)
    return problems


# --- model_cache (weight sources; issue 20) ---------------------------------------------------

_PREFIX = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")
_SPACES_ONLY = ("bucket", "region", "prefix", "streamer_concurrency")
_NFS_ONLY = ("size_gib", "tier")
# Flags the Spaces source sets on every replica.
_STREAMER_FLAGS = ("--load-format", "--model-loader-extra-config")


def _check_model_cache(raw: StackInput) -> list[Problem]:
    """Keys that only one kind reads, the bucket's name and region, and engines that can stream."""
    mc = raw.model_cache
    at = f"{NS}model_cache"
    given = mc.model_fields_set
    problems = []
    foreign = _NFS_ONLY if mc.kind == "spaces" else _SPACES_ONLY if mc.kind == "nfs" else _NFS_ONLY + _SPACES_ONLY
    for key in foreign:
        if key in given:
            problems.append(Problem(f"{at}.{key}", f"applies to kind {'nfs' if key in _NFS_ONLY else 'spaces'} only; this cache is kind {mc.kind!r}"))
    if mc.kind != "spaces":
        return problems
    if mc.bucket is None:
        problems.append(Problem(f"{at}.bucket", "required with kind spaces: the Spaces bucket the weights are stored in (names are unique across Spaces)"))
    else:
        why = bucket_name_problem(mc.bucket)
        if why:
            problems.append(
                Problem(f"{at}.bucket", f"{mc.bucket!r} {why}; use 3–63 lowercase letters, digits and '-', e.g. acme-prod-weights")
            )
    region_key = "region" if mc.region is not None else None
    region = mc.region or raw.region
    if region not in SPACES_REGIONS:
        nearest = NEAREST_SPACES_REGION.get(region)
        hint = f"; set model_cache.region: {nearest} (the nearest)" if nearest and region_key is None else ""
        where = f"{at}.region" if region_key else f"{at}.kind"
        problems.append(
            Problem(
                where,
                f"Spaces is not offered in {region!r}{hint}; regions with Spaces: {', '.join(SPACES_REGIONS)} "
                f"({SPACES_REGIONS_SOURCE})",
            )
        )
    if not _PREFIX.match(mc.prefix) or ".." in mc.prefix.split("/"):
        problems.append(Problem(f"{at}.prefix", f"{mc.prefix!r} is not an object key prefix; use segments of letters, digits, '.', '_' and '-' joined by '/', e.g. models"))
    minimum = versions.parse_version(versions.VLLM_RUNAI_STREAMER_MIN_VERSION)
    for i, model in enumerate(raw.models):
        found = versions.vllm_version_of_image(model.image) if model.image else None
        if found is not None and found < minimum:
            problems.append(
                Problem(
                    f"{NS}models[{i}].image",
                    f"{model.image!r} is vLLM {'.'.join(map(str, found))}; model_cache.kind spaces streams weights with "
                    f"the Run:ai Model Streamer, which needs vLLM ≥ {versions.VLLM_RUNAI_STREAMER_MIN_VERSION} "
                    "(infra/catalog/versions.py); use a newer image or another model_cache.kind",
                )
            )
        for j, arg in enumerate(model.extra_args):
            if canonical_flag(arg) in _STREAMER_FLAGS:
                problems.append(Problem(f"{NS}models[{i}].extra_args[{j}]", f"{arg!r} is set by model_cache.kind spaces (the streamer's load format and concurrency)"))
    return problems


def _check_pools(raw: StackInput) -> list[Problem]:
    problems = _duplicates(raw.gpu_pools, "name", "gpu_pools")
    for i, pool in enumerate(raw.gpu_pools):
        at = f"{NS}gpu_pools[{i}]"
        fixed = pool.nodes is not None
        ranged = pool.min_nodes is not None or pool.max_nodes is not None
        if fixed and ranged:
            problems.append(Problem(at, "give either nodes (fixed) or min_nodes/max_nodes (autoscaling), not both"))
        elif not fixed and not ranged:
            problems.append(Problem(at, "missing node count; give nodes (fixed) or min_nodes and max_nodes (autoscaling)"))
        elif ranged:
            if pool.min_nodes is None or pool.max_nodes is None:
                missing = "min_nodes" if pool.min_nodes is None else "max_nodes"
                problems.append(Problem(f"{at}.{missing}", "required for an autoscaling pool (give both min_nodes and max_nodes)"))
            elif pool.min_nodes > pool.max_nodes:
                problems.append(Problem(f"{at}.min_nodes", f"{pool.min_nodes} is greater than max_nodes ({pool.max_nodes})"))
        if pool.fabric and not pool.gpu.fabric:
            fabric_sizes = sorted(slug for slug, size in GPU_SIZES.items() if size.fabric)
            problems.append(
                Problem(f"{at}.fabric", f"true needs a fabric GPU size; {pool.size} has no RDMA fabric. Fabric sizes: {', '.join(fabric_sizes)}")
            )
        if pool.partition_mode and pool.gpu.vendor != "amd":
            problems.append(Problem(f"{at}.partition_mode", f"{pool.partition_mode!r} applies to AMD pools only; {pool.size} is {pool.gpu.vendor}"))
        if pool.gpu.fabric and any(p.gpu.fabric is False for p in raw.gpu_pools):
            problems.append(Problem(f"{at}.size", f"{pool.size} is a fabric size; fabric sizes cannot be mixed with other GPU pools in one cluster"))
        if pool.gpu.fabric and pool.max_node_count > 64:
            problems.append(Problem(f"{at}.max_nodes", f"{pool.max_node_count} exceeds 64, the node limit for fabric sizes"))
    return problems


def _check_runtime(raw: StackInput) -> list[Problem]:
    rt = raw.gpu_runtime
    amd = any(p.gpu.vendor == "amd" for p in raw.gpu_pools)
    problems = []
    if rt.mode != "doks-managed" and not amd:
        problems.append(Problem(NS + "gpu_runtime.mode", f"{rt.mode!r} manages AMD GPUs but no gpu_pools entry is an AMD size"))
    return problems


def _check_models(raw: StackInput, base_dir: Path | None) -> list[Problem]:
    # Under router.kind gateway a duplicate name is worse than a clash: the InferencePool selects
    # engine pods by their model label, so one model's pool would take in the other's engines.
    pool_hint = " (with router.kind gateway, one model's InferencePool would select the other's engine pods)"
    problems = _duplicates(raw.models, "name", "models", pool_hint if raw.router.kind == "gateway" else "")
    problems += _duplicates(raw.models, "api_model_name", "models")
    pools = {p.name: p for p in raw.gpu_pools}
    by_pool: dict[str, list[int]] = {}
    for i, model in enumerate(raw.models):
        at = f"{NS}models[{i}]"
        pool = pools.get(model.pool)
        if pool is None:
            close = difflib.get_close_matches(model.pool, list(pools), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(Problem(f"{at}.pool", f"{model.pool!r} is not a pool{hint}; defined pools: {', '.join(pools)}"))
            continue
        by_pool.setdefault(model.pool, []).append(i)
        if model.image is not None and (":" not in model.image.rsplit("/", 1)[-1] or model.image.endswith(":latest")):
            problems.append(Problem(f"{at}.image", f"{model.image!r} is not pinned; give an explicit tag other than latest"))
        for j, arg in enumerate(model.extra_args):
            flag = canonical_flag(arg)  # as vLLM reads it: `--tensor_parallel_size=2` and `-tp 2` included
            if flag in _LAYOUT_FLAGS:
                problems.append(
                    Problem(f"{at}.extra_args[{j}]", f"{arg!r} is set by the layout; change models[{i}].layout instead")
                )
            elif flag in _OBSERVABILITY_FLAGS:
                problems.append(Problem(f"{at}.extra_args[{j}]", f"{arg!r} is not allowed: {_OBSERVABILITY_FLAGS[flag]}"))
        problems += _plain_secret_problems(model, at)
        problems += _check_kv_offload(model, at)
        pool_at = f"{NS}gpu_pools[{[p.name for p in raw.gpu_pools].index(model.pool)}]"
        problems += _check_model_layout(model, pool, at, base_dir, pool_at)
    for pool_name, indices in by_pool.items():
        if len(indices) > 1:
            models = [raw.models[i] for i in indices]
            if any(m.layout is None for m in models):
                problems.append(
                    Problem(
                        f"{NS}models[{indices[1]}].pool",
                        f"pool {pool_name!r} is shared by several models; shared pools need explicit layouts "
                        "(layout: auto plans a whole node per model)",
                    )
                )
            else:
                gpus = pools[pool_name].gpu.gpus
                used = sum(m.layout.to_layout(gpus).gpus_per_node_used for m in models)
                if used > gpus:
                    problems.append(
                        Problem(f"{NS}models[{indices[-1]}].layout", f"models on pool {pool_name!r} use {used} GPUs per node; it has {gpus}")
                    )
    problems += _check_autoscaling(raw, pools, by_pool)
    return problems


def _check_kv_offload(model: ModelConfig, at: str) -> list[Problem]:
    """A tier needs its size (cpu, lmcache) and no other connector; lmcache an image with LMCache;
    the session model and a fixed hit rate are two answers to one question. The size is checked
    against host memory in the plan, once the layout (auto or explicit) is known."""
    from infra.planner.prefix_cache import session_shape

    off, w, problems = model.kv_offload, model.workload, []
    if off.kind in ("cpu", "lmcache") and off.size_gib is None:
        problems.append(Problem(f"{at}.kv_offload.size_gib", f"required with kind {off.kind}: GiB of host memory per engine"))
    if off.kind in ("none", "auto") and off.size_gib is not None:
        problems.append(Problem(f"{at}.kv_offload.size_gib", f"not used with kind {off.kind} (cpu or lmcache take a size)"))
    if off.kind != "none" and isinstance(model.layout, PdLayoutConfig):
        problems.append(Problem(
            f"{at}.kv_offload",
            "not with a prefill/decode layout: its engines' --kv-transfer-config carries the P/D connector, which vLLM's "
            "offloading switch would replace (composing both through MultiConnector is not supported here)",
        ))
    if off.kind == "lmcache" and model.image is None:
        problems.append(Problem(
            f"{at}.image",
            "kv_offload lmcache needs an image with LMCache installed: the pinned vLLM images are built without it "
            "(vLLM's docker/Dockerfile.rocm --build-arg INSTALL_LMCACHE=true builds one); set models[].image",
        ))
    if off.kind == "auto" and w.turns_per_session == 1:
        problems.append(Problem(f"{at}.kv_offload", "auto needs workload.turns_per_session above 1: the planner decides from the sessions"))
    if w.turns_per_session > 1 and w.prefix_cache_hit_rate > 0:
        problems.append(Problem(
            f"{at}.workload.prefix_cache_hit_rate",
            "set prefix_cache_hit_rate or turns_per_session, not both: with sessions the planner predicts the hit rate",
        ))
    if w.turns_per_session == 1 and "new_tokens_per_turn" in w.model_fields_set:
        problems.append(Problem(f"{at}.workload.new_tokens_per_turn", "only with turns_per_session above 1"))
    try:
        session_shape(w.to_workload())
    except ValueError as err:
        problems.append(Problem(f"{at}.workload", str(err)))
    return problems


def _check_autoscaling(raw: StackInput, pools: dict[str, GpuPoolConfig], by_pool: dict[str, list[int]]) -> list[Problem]:
    """`autoscaling.enabled: true` needs a pool range to scale in, a running replica to read the queue
    from (min_nodes ≥ 1), the pool to itself, and Prometheus."""
    problems = []
    for i, model in enumerate(raw.models):
        pool = pools.get(model.pool)
        if model.autoscaling.enabled is not True or pool is None:
            continue
        at = f"{NS}models[{i}].autoscaling.enabled"
        if pool.min_node_count >= pool.max_node_count:
            problems.append(Problem(at, f"true needs pool {pool.name!r} to autoscale; give it min_nodes < max_nodes instead of a fixed count"))
        elif pool.min_node_count == 0:
            problems.append(
                Problem(
                    at,
                    f"true cannot start pool {pool.name!r} from min_nodes 0: the queue metric KEDA scales on exists only "
                    "while a vLLM pod runs; give the pool min_nodes ≥ 1 or set it to false",
                )
            )
        elif len(by_pool.get(model.pool, [])) > 1:
            problems.append(Problem(at, f"true needs pool {pool.name!r} to itself; models sharing a pool would compete for its nodes"))
        if not _observability_on(raw):
            problems.append(Problem(at, "true needs observability (the queue metric comes from Prometheus); enable observability or set it to false"))
    return problems


def _observability_on(raw: StackInput) -> bool:
    return raw.environment != "dev" if raw.observability.enabled is None else bool(raw.observability.enabled)


def _pd_spans_nodes(layout: PdLayoutConfig, pool: GpuPoolConfig | None) -> bool:
    """Whether a P/D unit spans nodes of its pool (True when that cannot be told: the layout or
    pool is itself in error, reported elsewhere)."""
    try:
        return pool is None or layout.to_layout(pool.gpu.gpus).spans_nodes
    except (KeyError, ValueError):
        return True


def _resolve_autoscaling(raw: StackInput) -> list[ModelConfig]:
    """Each model with `autoscaling.enabled` decided (never None afterwards)."""
    pools = {p.name: p for p in raw.gpu_pools}
    sharing = {m.pool: sum(1 for n in raw.models if n.pool == m.pool) for m in raw.models}
    out = []
    for model in raw.models:
        enabled = model.autoscaling.enabled
        if enabled is None and isinstance(model.layout, PdLayoutConfig) and _pd_spans_nodes(model.layout, pools.get(model.pool)):
            enabled = False  # a unit over nodes grows in whole units only: its sides are not autoscaled
        if enabled is None:
            pool = pools[model.pool]
            enabled = 1 <= pool.min_node_count < pool.max_node_count and sharing[model.pool] == 1 and _observability_on(raw)
        out.append(model.model_copy(update={"autoscaling": model.autoscaling.model_copy(update={"enabled": enabled})}))
    return out


# Flags the layout owns; setting them through extra_args would silently fight the layout. Canonical
# spellings only: `canonical_flag` maps underscores, `=VALUE` and short aliases (`-tp`, `-dp`) to them.
_LAYOUT_FLAGS = {
    "--tensor-parallel-size",
    "--enable-expert-parallel",
    "--data-parallel-size",
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--gpu-memory-utilization",
    "--kv-cache-dtype",
    "--max-model-len",
    "--served-model-name",
    "--port",
    # set for a replica that spans nodes (layout.nodes_per_replica; infra/render/vllm_args.py)
    "--data-parallel-size-local",
    "--data-parallel-address",
    "--data-parallel-rpc-port",
    "--data-parallel-start-rank",
    "--headless",
    "--nnodes",
    "--node-rank",
    "--master-addr",
    "--master-port",
}


# Flags that would silently break the SLO rules, which read vLLM's default histogram buckets.
_OBSERVABILITY_FLAGS = {
    "--custom-histogram-buckets": "the SLO rules and alerts select vLLM's default TTFT/TPOT histogram "
    "buckets by their bounds; other buckets would leave them without data and silence the burn-rate alerts",
}


# Credentials by their published prefixes: Hugging Face (hf_), DigitalOcean (dop_v1_, doo_v1_, ...),
# OpenAI-style (sk-), GitHub (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), GitLab (glpat-), Slack
# (xoxb-, ...), AWS access key ids (AKIA...).
_TOKEN_VALUE = re.compile(
    r"(?:^|[\s=:'\"])(?:hf_[A-Za-z0-9]{16,}|do[a-z]_v1_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})"
)
# Variable names that say "credential": a whole `_`-separated word (VLLM_..._TOKEN_THRESHOLD holds a count).
_SECRET_NAME = re.compile(r"(?:^|_)(?:TOKEN|SECRET|PASSWORD|PASSWD|PASS|KEY|APIKEY|CREDENTIALS?|AUTH)(?:$|_)", re.IGNORECASE)
_NUMBER_OR_FLAG = re.compile(r"^\s*(?:[+-]?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|true|false|yes|no|on|off)?\s*$", re.IGNORECASE)


def _secret_mechanism(name: str) -> str:
    """Where the secret belongs instead of a plain `env:` value."""
    upper = name.upper()
    if upper in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN") or upper.startswith("HF_"):
        return "set the stack's huggingface_token secret instead (`pulumi config set --secret huggingface_token ...`); the model pods get it as HF_TOKEN"
    if upper in ("VLLM_API_KEY", "API_KEY", "OPENAI_API_KEY"):
        return "set the stack's api_key secret instead (`pulumi config set --secret api_key ...`); the model pods get it as VLLM_API_KEY"
    return (
        "plain-text secrets would land in the plan, the Deployment and `pulumi preview`; the stack's secrets are "
        "huggingface_token and api_key (`pulumi config set --secret KEY ...`), or keep the variable out of the stack file"
    )


def _plain_secret_problems(model: ModelConfig, at: str) -> list[Problem]:
    """A credential written into `env` (or `extra_args`) would be copied verbatim into the plan JSON and the
    Deployment: refused, as every plain-text secret is (README "Secrets")."""
    problems = []
    for name, value in model.env.items():
        if _TOKEN_VALUE.search(value):
            problems.append(Problem(f"{at}.env.{name}", f"the value looks like an access token; {_secret_mechanism(name)}"))
        elif _SECRET_NAME.search(name) and not _NUMBER_OR_FLAG.match(value):
            problems.append(Problem(f"{at}.env.{name}", f"{name} names a credential and is given in plain text; {_secret_mechanism(name)}"))
    for j, arg in enumerate(model.extra_args):
        if _TOKEN_VALUE.search(arg):
            problems.append(Problem(f"{at}.extra_args[{j}]", f"looks like an access token; {_secret_mechanism('')}"))
        elif canonical_flag(arg) == "--api-key":
            problems.append(Problem(f"{at}.extra_args[{j}]", f"{arg.split('=')[0]!r} would put the key in plain text; {_secret_mechanism('API_KEY')}"))
    return problems


def _check_model_layout(model: ModelConfig, pool: GpuPoolConfig, at: str, base_dir: Path | None, pool_at: str = "") -> list[Problem]:
    """Resolve the architecture and check an explicit layout against model and node."""
    from infra.catalog.models import resolve_model  # local import: the catalog is large
    from infra.planner import check_layout

    hf_path = _hf_config_path(model, base_dir)
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
    problems = _context_problems(model, arch, at)
    if model.layout is None:
        return problems
    if isinstance(model.layout, PdLayoutConfig):
        return problems + _pd_layout_problems(model, pool, arch, at, pool_at)
    if model.layout.nodes_per_replica > 1:
        multi = _multi_node_layout_problems(model, pool, at, pool_at)
        if multi:
            return problems + multi
    return problems + [Problem(f"{at}.layout", msg) for msg in check_layout(arch, pool.gpu, model.layout.to_layout())]


def _whole_groups_problems(pool: GpuPoolConfig, pool_at: str, nodes: int, what) -> list[Problem]:
    """The pool's node count (or min/max) in whole groups of `nodes` (a replica or a P/D unit over
    nodes): one problem at the first count that is not, `what(count)` saying what it is not."""
    for name, count in (("min_nodes", pool.min_node_count), ("max_nodes", pool.max_node_count)):
        if count % nodes:
            label = "nodes" if pool.nodes is not None else name
            return [Problem(f"{pool_at}.{label}", f"{what(count)} ({', '.join(str(nodes * k) for k in range(1, 4))}, ...)")]
    return []


def _multi_node_layout_problems(model: ModelConfig, pool: GpuPoolConfig, at: str, pool_at: str) -> list[Problem]:
    """A replica over several nodes against its pool: a fabric pool, big enough, node counts in whole
    replicas, every GPU of its nodes used. One problem each, before the shape checks."""
    lay = model.layout
    n, gpus = lay.nodes_per_replica, pool.gpu.gpus
    key = f"{at}.layout.nodes_per_replica"
    if not pool.fabric:
        fabric_sizes = sorted(slug for slug, size in GPU_SIZES.items() if size.fabric)
        return [
            Problem(
                key,
                f"{n} spans nodes, which needs an RDMA fabric pool; pool {pool.name!r} ({pool.size}) has fabric: false. "
                f"Allowed: 1, or a pool of a fabric size ({', '.join(fabric_sizes)}) with fabric: true",
            )
        ]
    if n > pool.max_node_count:
        return [
            Problem(
                key,
                f"{n}: one replica is larger than pool {pool.name!r}, which has at most {pool.max_node_count} node(s); "
                f"allowed: at most {pool.max_node_count}, or more nodes in the pool",
            )
        ]
    problems = []
    if lay.tp * lay.dp != n * gpus:
        problems.append(
            Problem(
                f"{at}.layout",
                f"gpus_per_replica tp × dp = {lay.tp}×{lay.dp} = {lay.tp * lay.dp} is not nodes_per_replica × GPUs per node = "
                f"{n}×{gpus} = {n * gpus}; a replica over nodes uses every GPU of them (with ep: dp = {n * gpus} / tp; without: tp = {n * gpus})",
            )
        )
    if lay.replicas_per_node != 1:
        problems.append(Problem(f"{at}.layout.replicas_per_node", f"{lay.replicas_per_node} with nodes_per_replica {n}; allowed: 1 (a replica over nodes is the only one on each)"))
    problems += _whole_groups_problems(
        pool, pool_at, n, lambda count: f"{count} is not a multiple of models[{model.name!r}].layout.nodes_per_replica {n}; allowed: whole replicas"
    )
    return problems


# MoRI is bundled in vllm/vllm-openai-rocm from v0.21.0 (MoRIIOConnector itself from vLLM 0.14.0);
# vllm docs/features/moriio_connector_usage.md, serving-research B1.
MORIIO_MIN_ROCM_IMAGE = (0, 21, 0)


def _pd_layout_problems(model: ModelConfig, pool: GpuPoolConfig, arch: Any, at: str, pool_at: str) -> list[Problem]:
    """A P/D layout against the pool (connector, nodes, fabric) and the model's engine image."""
    from infra.planner.disaggregation import CONNECTORS, pd_problems

    gpu = pool.gpu
    pd = model.layout.to_layout(gpu.gpus)
    problems = []
    if gpu.vendor not in CONNECTORS:
        allowed = ", ".join(f"{v} GPUs ({c})" for v, c in sorted(CONNECTORS.items()))
        return [Problem(f"{at}.layout", f"{pd.name} needs a KV connector; {gpu.slug} ({gpu.vendor}) has none. Supported: {allowed}")]
    if gpu.vendor == "amd" and model.image is not None:
        version = versions.vllm_version_of_image(model.image)
        if version is not None and version < MORIIO_MIN_ROCM_IMAGE:
            problems.append(
                Problem(
                    f"{at}.image",
                    f"{model.image!r} (vLLM {'.'.join(map(str, version))}) does not ship MoRIIOConnector for P/D layout {pd.name}; "
                    f"give a vllm/vllm-openai-rocm image of v{'.'.join(map(str, MORIIO_MIN_ROCM_IMAGE))} or later, or a colocated layout",
                )
            )
    for msg in pd_problems(arch, gpu, pd, fabric=pool.fabric, pool_nodes=pool.max_node_count):
        problems.append(Problem(f"{at}.layout", f"{pd.name}: {msg}"))
    if pd.spans_nodes and not problems:
        k = pd.nodes_per_unit
        problems += _whole_groups_problems(
            pool, pool_at, k, lambda count: f"{count} is not whole units of models[{model.name!r}].layout {pd.name}, which spans {k} nodes; allowed"
        )
    if not problems:
        from infra.planner.memory import memory_per_gpu

        context = model.workload.input_tokens + model.workload.output_tokens
        kv = pd.with_(kv_cache_dtype="fp8") if pd.kv_cache_dtype.startswith("fp8") else pd
        for role, tokens in (("prefill", model.workload.input_tokens + 1), ("decode", context)):
            mem = memory_per_gpu(arch, gpu, kv.side(role), tokens)
            if not mem.fits:
                problems.append(Problem(f"{at}.layout", f"{pd.name}: the {role} engine of TP{kv.side(role).tp} does not fit: {mem.problem}"))
    if model.autoscaling.enabled and pd.spans_nodes:
        problems.append(
            Problem(
                f"{at}.autoscaling.enabled",
                f"true is not supported with P/D layout {pd.name}, whose unit spans {pd.nodes_per_unit} nodes: its engines are whole "
                "nodes paired over the fabric and the pool counts whole units, so one side cannot grow alone; set it to false, "
                "or use a unit within one node",
            )
        )
    return problems


def _context_problems(model: ModelConfig, arch: Any, at: str) -> list[Problem]:
    """A typical request longer than the model's context (or an explicit max_model_len) is one vLLM
    refuses outright: the stack would serve nothing of the traffic it was sized for."""
    w = model.workload
    need = w.input_tokens + w.output_tokens
    if need > arch.max_context:
        return [
            Problem(
                f"{at}.workload",
                f"input_tokens + output_tokens = {w.input_tokens} + {w.output_tokens} = {need} exceeds the "
                f"{arch.max_context}-token context of {arch.id}; vLLM would refuse every such request. Give at most "
                f"{arch.max_context} tokens in total, or serve a long-context variant",
            )
        ]
    limit = model.layout.max_model_len if model.layout is not None else None
    if limit is not None and need > limit:
        return [
            Problem(
                f"{at}.layout.max_model_len",
                f"{limit} is shorter than a typical request (input_tokens + output_tokens = {need}); vLLM would refuse "
                f"it. Give at least {need} (at most {arch.max_context}), or leave it unset",
            )
        ]
    return []


def gated_models(models: list[ModelConfig]) -> list[ModelConfig]:
    """The models whose Hugging Face repo is gated (infra/catalog/models.py `is_gated`)."""
    from infra.catalog.models import is_gated  # local import: the catalog is large

    return [m for m in models if is_gated(m.source)]


def _check_secrets(raw: StackInput, secrets_set: set[str], plain: set[str]) -> tuple[list[Problem], tuple[str, ...]]:
    problems = [
        Problem(
            key if ":" in key else NS + key,
            f"given in plain text; secrets must be set with `pulumi config set --secret {key.removeprefix(NS)} ...`",
        )
        for key in sorted(plain)
    ]
    required = []
    # A gated repo (meta-llama/*, ...) downloads only with a token of an account that accepted its
    # terms: without one the prefetch Job fails with 401 at deploy time. `pulumi up` refuses to start
    # without it; the offline plan lists it under "secrets to set" and names the models.
    if gated_models(raw.models):
        required.append("huggingface_token")
    # A public endpoint checks keys; so does the gateway unless told not to (router.gateway.authentication).
    needs_api_key = raw.router.public or (raw.router.kind == "gateway" and raw.router.gateway.authentication == "api-key")
    if needs_api_key:
        required.append("api_key")
    if _observability_on(raw):
        required.append("grafana_admin_password")
        if raw.observability.alert_receiver.kind != "none":
            required.append("alert_webhook_url")
    if raw.router.public and raw.router.kind == "service":
        problems.append(Problem(NS + "router.public", "true needs a router (kind session, prefix, round-robin or gateway) to check the API key; kind 'service' exposes vLLM directly"))
    if raw.router.kind == "session" and raw.router.session_header.lower() != "x-session-id":
        problems.append(Problem(NS + "router.session_header", f"{raw.router.session_header!r}: vllm-router 0.1.17 keys sessions on x-session-id and has no flag to rename the header; use x-session-id (clients send that header)"))
    image = raw.router.image
    if image is not None and (":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest") or not image.strip() or any(c.isspace() for c in image)):
        problems.append(Problem(NS + "router.image", f"{image!r} is not a pinned image reference; give an image built from images/vllm-router/Dockerfile with an explicit tag other than latest"))
    if raw.router.tls_certificate_id and not raw.router.public:
        problems.append(Problem(NS + "router.tls_certificate_id", "applies only with router.public: true (TLS terminates on the public load balancer)"))
    return problems, tuple(required)


def stack_name_problem(stack: str) -> str | None:
    """Why `stack` cannot name a stack (its file and its DigitalOcean resources), or None."""
    if _STACK_NAME.match(stack):
        return None
    shown = stack if len(stack) <= 60 else stack[:57] + "..."
    return f"{shown!r} is not a valid stack name; use {STACK_NAME_RULE}"


def _stack_name_problems(stack: str) -> list[Problem]:
    problem = stack_name_problem(stack)
    return [Problem("stack", problem)] if problem else []


def _foreign_key_problems(key: str) -> list[Problem]:
    """A key outside our namespace is fine in a provider's or Pulumi's; in any other namespace nobody
    reads it, and one that looks like ours is a typo whose setting silently does nothing."""
    namespace = key.split(":", 1)[0]
    if namespace in OTHER_NAMESPACES:
        return []
    allowed = ", ".join(f"{n}:" for n in (PROJECT, *OTHER_NAMESPACES))
    close = difflib.get_close_matches(namespace, [PROJECT, *OTHER_NAMESPACES], n=1, cutoff=0.75)
    if close:
        fixed = f"{close[0]}:{key.split(':', 1)[1]}"
        return [Problem(key, f"unknown namespace {namespace!r} (did you mean {fixed!r}?); nothing reads this key. Namespaces: {allowed}")]
    return [Problem(key, f"unknown namespace {namespace!r}: no provider of this program reads it. Namespaces: {allowed}")]


def load_config(
    values: dict[str, Any],
    *,
    stack: str,
    secret_keys: set[str] | frozenset[str] = frozenset(),
    base_dir: Path | None = None,
    source: str | None = None,
) -> StackConfig:
    """Validate raw config values (project keys without the namespace, parsed from YAML/JSON).

    `secret_keys` names the keys (full `ns:key` form) that were given as secrets. Secret values are
    never passed in: only their presence matters here.
    """
    plain_secrets = set()
    secrets_set = set()
    project_values = {}
    early = _stack_name_problems(stack)
    for key, value in values.items():
        if key in PROVIDER_SECRET_KEYS:
            if key not in secret_keys:
                plain_secrets.add(key)
            continue
        if ":" in key and not key.startswith(NS):
            early += _foreign_key_problems(key)
            continue  # other providers' keys (kubernetes:*, pulumi:*) are theirs to validate
        short = key.removeprefix(NS)
        if short in SECRET_KEYS:
            if f"{NS}{short}" in secret_keys or short in secret_keys:
                secrets_set.add(short)
            else:
                plain_secrets.add(short)
            continue
        project_values[short] = value

    try:
        raw = StackInput.model_validate(project_values)
    except ValidationError as err:
        problems = [_problem_from_pydantic(e) for e in err.errors(include_url=False)]
        problems += [Problem(NS + k if ":" not in k else k, "given in plain text; set it with `pulumi config set --secret`") for k in sorted(plain_secrets)]
        raise ConfigError(early + problems, source=source) from None

    problems = early + _check_network(raw) + _check_pools(raw) + _check_runtime(raw) + _check_models(raw, base_dir)
    problems += _check_cluster(raw)
    problems += _check_model_cache(raw)
    problems += _check_gateway(raw)
    secret_problems, required = _check_secrets(raw, secrets_set, plain_secrets)
    problems += secret_problems
    if problems:
        raise ConfigError(problems, source=source)

    cluster, obs = _environment_defaults(raw)
    return StackConfig(
        stack=stack,
        environment=raw.environment,
        region=raw.region,
        network=raw.network,
        cluster=cluster,
        gpu_pools=raw.gpu_pools,
        gpu_runtime=raw.gpu_runtime,
        model_cache=raw.model_cache,
        models=_resolve_autoscaling(raw),
        router=raw.router,
        observability=obs,
        secrets_set=frozenset(secrets_set),
        secrets_required=required,
        base_dir=base_dir,
        spaces_credentials_set=all(k in values for k in SPACES_PROVIDER_KEYS),
    )


def zero_replica_notes(cfg: StackConfig) -> list[str]:
    """A parked pool (min_nodes 0) is valid, but a model on it silently serves nothing: the plan says so."""
    notes = []
    for model in cfg.models:
        pool = cfg.pool(model.pool)
        if pool.min_node_count == 0 and not model.autoscaling.enabled:
            notes.append(
                f"model {model.name}: pool {pool.name} has min_nodes 0, so the model gets 0 replicas and serves "
                "nothing until min_nodes ≥ 1"
            )
    return notes


# --------------------------------------------------------------------------- stack files


def stack_file(stack: str, root: Path) -> Path:
    """`stacks/Pulumi.<stack>.yaml` of the project at `root` (`infra.project.project_root`); a name
    that is not a stack name (`../etc/passwd`) is refused before any path is built from it."""
    problem = stack_name_problem(stack)
    if problem:
        raise ConfigError([Problem("stack", problem)])
    return root / "stacks" / f"Pulumi.{stack}.yaml"


class _StackFileLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate keys as Pulumi's YAML parser does (PyYAML would
    silently keep the last value, so the file would mean one thing here and fail in `pulumi up`)."""


def _construct_mapping_once(loader: _StackFileLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _value in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: the constructor below says so
            continue
        if first is not None:
            raise _DuplicateKey(key, first, key_node.start_mark.line + 1)
        seen[key] = key_node.start_mark.line + 1
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StackFileLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping_once)


class _DuplicateKey(Exception):
    def __init__(self, key: Any, first_line: int, line: int):
        super().__init__(key)
        self.key, self.first_line, self.line = key, first_line, line


def parse_stack_text(text: str, source: Any) -> tuple[dict[str, Any], set[str]]:
    """Raw config values and the set of keys given as `secure:` secrets (values never decrypted),
    from a stack file's text; `source` names it in errors."""
    try:
        doc = yaml.load(text, Loader=_StackFileLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as dup:
        raise ConfigError(
            f"{source}: line {dup.line}: duplicate key {dup.key!r} (first at line {dup.first_line}); Pulumi refuses "
            "a stack file with a key given twice: keep one"
        ) from None
    except yaml.YAMLError as err:
        raise ConfigError(yaml_error_line(source, err)) from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: expected a mapping with a `config:` key, got {_yaml_kind(doc)}")
    if "config" not in doc:
        stray = [str(k) for k in doc if ":" in str(k)]
        if stray:
            raise ConfigError(
                f"{source}: no `config:` mapping; the keys {', '.join(stray[:3])}{' ...' if len(stray) > 3 else ''} "
                "sit at the top level: indent them under `config:` (as `pulumi config set` writes them)"
            )
        raise ConfigError(f"{source}: no `config:` mapping; a stack file holds its settings under `config:` (see stacks/Pulumi.dev.yaml)")
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: `config:` must be a mapping, got {_yaml_kind(config)}")
    values: dict[str, Any] = {}
    secret_keys: set[str] = set()
    problems = []
    for key, value in config.items():
        key = str(key)
        if isinstance(value, dict) and set(value) == {"secure"}:
            cipher = value["secure"]
            if not isinstance(cipher, str) or not cipher.strip():
                short = key.removeprefix(NS)
                problems.append(
                    Problem(
                        key if ":" in key else NS + key,
                        f"`secure:` holds no ciphertext, so the secret is not set; set it again with "
                        f"`pulumi config set --secret {short} ...` (never edit `secure:` by hand)",
                    )
                )
                continue
            secret_keys.add(key)
            values[key] = None
        else:
            values[key] = value
    if problems:
        raise ConfigError(problems, source=str(source))
    return values, secret_keys


def _yaml_kind(value: Any) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(type(value), type(value).__name__)


def read_stack_file(path: Path) -> tuple[dict[str, Any], set[str]]:
    """Raw config values and the set of keys given as `secure:` secrets (values never decrypted)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    return parse_stack_text(text, path)


def load_stack_file(stack: str, root: Path) -> StackConfig:
    """Load and validate `stacks/Pulumi.<stack>.yaml`."""
    path = stack_file(stack, root)
    if not path.is_file():
        available = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in path.parent.glob("Pulumi.*.yaml"))
        raise ConfigError(f"no stack file {path}; stacks: {', '.join(available) or 'none'}")
    values, secret_keys = read_stack_file(path)
    return load_config(values, stack=stack, secret_keys=secret_keys, base_dir=path.parent.parent, source=str(path.relative_to(path.parent.parent)))
