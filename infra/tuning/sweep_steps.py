"""The benchmark sweep as one ordered list of steps, and the offline `run.sh` generated from it.

`sweep_steps(bundle)` is the single source of truth for how a sweep runs: apply the weight
prefetch and wait for it (a failure stops everything: no layout could load), then per layout
apply its objects, wait for its sweep Job (bounded by the Job's own deadline), collect the
`BENCH_RESULT` lines of the Job's log into `results/<layout>/`, delete the layout's objects so the
next one gets the node's GPUs. A layout whose Job fails or times out is reported, its measured
rates are still collected, and the sweep goes on.

Two executors follow the list: `infra bench --apply` runs it through the Kubernetes API
(`infra/commands/bench_runner.py`), and `render_run_script` turns it into a POSIX sh script with
kubectl for offline use. Neither decides an order, a deadline or a failure policy of its own.

Jobs are awaited by polling their conditions, not `kubectl wait --for=condition=complete`: that
ignores a Failed Job and sits out the whole deadline (hours) for every failed layout. Conditions,
not pod counters: a Job with a backoffLimit (the prefetch retries) has failed pods long before the
Job itself has failed.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Literal, Protocol


class SweepBundle(Protocol):
    """What a sweep reads of `infra bench`'s bundle (infra/tuning/bench.py `BenchBundle`): declared
    here, so the bundle's module imports this one and not the other way round."""

    @property
    def target(self) -> Any: ...  # BenchTarget: stack, model, service
    @property
    def options(self) -> Any: ...  # BenchOptions: run_id, ...
    @property
    def sweeps(self) -> tuple[Any, ...]: ...  # LayoutSweep per layout, in run order
    @property
    def layouts(self) -> tuple[tuple[str, list[dict]], ...]: ...  # (directory name, objects)
    @property
    def prefetch(self) -> dict | None: ...

RESULT_LINE_PREFIX = "BENCH_RESULT"
RESULTS_DIR = "results"
WAIT_POLL_SECONDS = 15  # how often a runner reads a Job's conditions
WAIT_SLACK_SECONDS = 60  # past a Job's activeDeadlineSeconds, for its DeadlineExceeded to appear
LOG_TAIL_LINES = 40


@dataclass(frozen=True)
class LogTail:
    """Log lines shown when a wait fails: `ref` names it for kubectl (`job/<name>`), `selector`
    finds its pods through the API; `container` None means every container, lines prefixed."""

    ref: str
    selector: str
    container: str | None = None
    lines: int = LOG_TAIL_LINES


@dataclass(frozen=True)
class Apply:
    """Create every object of one bundle directory (objects left by an earlier run are reused)."""

    directory: str
    objects: tuple[dict, ...]
    layout: str | None  # None for the weight prefetch

    @property
    def summary(self) -> str:
        return f"apply {self.directory}/"


@dataclass(frozen=True)
class WaitForJob:
    """Poll a Job's conditions until complete, failed, or `timeout_s` passed.

    on_failure "stop": nothing after this step can work (the weights are not there); "continue":
    report the layout as incomplete, show `failure_logs`, and go on with the next step.
    """

    job: str
    timeout_s: int
    label: str  # how messages name it: "weight prefetch job <name>", "job <name>"
    on_failure: Literal["stop", "continue"]
    failure_logs: tuple[LogTail, ...]
    layout: str | None

    @property
    def summary(self) -> str:
        return f"wait job/{self.job}"


@dataclass(frozen=True)
class CollectResults:
    """Write every `BENCH_RESULT <file> <json>` line of the Job's `container` log into `directory`
    (relative to the bundle: `results/<layout>`). Also after a failed Job: what it measured counts."""

    job: str
    container: str
    directory: str
    layout: str

    @property
    def summary(self) -> str:
        return f"collect job/{self.job} into {self.directory}/"


@dataclass(frozen=True)
class Delete:
    """Delete a layout's objects (in reverse apply order), freeing the node for the next one."""

    directory: str
    objects: tuple[dict, ...]

    @property
    def summary(self) -> str:
        return f"delete {self.directory}/"


Step = Apply | WaitForJob | CollectResults | Delete


def sweep_steps(bundle: SweepBundle) -> list[Step]:
    """Every step of the sweep, in the order a runner must take them (pure)."""
    steps: list[Step] = []
    if bundle.prefetch:
        name = bundle.prefetch["metadata"]["name"]
        steps += [
            Apply("00-prefetch", (bundle.prefetch,), None),
            WaitForJob(
                name,
                bundle.prefetch["spec"]["activeDeadlineSeconds"] + WAIT_SLACK_SECONDS,
                f"weight prefetch job {name}",
                "stop",
                (LogTail(f"job/{name}", f"job-name={name}"),),
                None,
            ),
        ]
    for (directory, objects), sweep in zip(bundle.layouts, bundle.sweeps, strict=True):
        layout = sweep.layout.name
        engine = objects[0]
        job = objects[-1]
        name = job["metadata"]["name"]
        engine_pods = ",".join(f"{k}={v}" for k, v in engine["spec"]["selector"]["matchLabels"].items())
        steps += [
            Apply(directory, tuple(objects), layout),
            WaitForJob(
                name,
                job["spec"]["activeDeadlineSeconds"] + WAIT_SLACK_SECONDS,
                f"job {name}",
                "continue",
                (
                    LogTail(f"job/{name}", f"job-name={name}"),
                    LogTail(f"deployment/{engine['metadata']['name']}", engine_pods, "vllm"),
                ),
                layout,
            ),
            CollectResults(name, "bench", f"{RESULTS_DIR}/{layout}", layout),
            Delete(directory, tuple(objects)),
        ]
    return steps


# --- the offline runner ----------------------------------------------------------------------------


_WAIT_JOB = [
    "# wait_job JOB SECONDS: 0 once the Job reports Complete/SuccessCriteriaMet; 1 as soon as it",
    "# reports Failed/FailureTarget, or when SECONDS pass.",
    "wait_job() {",
    "  end=$(( $(date +%s) + $2 ))",
    "  while :; do",
    '    state=$(kubectl -n "$namespace" get job "$1" -o jsonpath='
    + """'{range .status.conditions[?(@.status=="True")]}{.type}{" "}{end}') || state=''""",
    '    case " $state " in',
    '      *" Failed "*|*" FailureTarget "*) echo "job $1 failed"; return 1 ;;',
    '      *" Complete "*|*" SuccessCriteriaMet "*) return 0 ;;',
    "    esac",
    '    if [ "$(date +%s)" -ge "$end" ]; then echo "job $1 neither completed nor failed within $2 s"; return 1; fi',
    '    sleep "$poll"',
    "  done",
    "}",
]


def render_run_script(bundle: SweepBundle) -> str:
    """POSIX sh with kubectl, generated step by step from `sweep_steps(bundle)`: the same order,
    deadlines and failure policy as `infra bench --apply`. Exits non-zero when a layout did not
    complete, after every layout has had its turn."""
    target, options = bundle.target, bundle.options
    lines = [
        "#!/bin/sh",
        f"# Benchmark sweep for {target.model} on stack {target.stack}, run {options.run_id}.",
        "# Generated by `infra bench` from the same step list `infra bench --apply` runs: each layout",
        "# needs the node's GPUs, so layouts run one after another: apply, wait for the sweep Job,",
        "# collect its results from the log, delete, next. Needs kubectl on the stack's cluster.",
        "set -eu",
        'cd "$(dirname "$0")"',
        f"namespace={shlex.quote(target.service.namespace)}",
        f'poll="${{BENCH_POLL_SECONDS:-{WAIT_POLL_SECONDS}}}"',
        "failed=0",
        "",
        *_WAIT_JOB,
        "",
    ]
    for step in sweep_steps(bundle):
        lines += _shell(step)
    lines += [
        "if [ \"$failed\" -ne 0 ]; then echo 'some layouts did not complete; results/ holds the rates they measured'; fi",
        "echo 'done; next:'",
        f"echo '  infra tune ingest results/ --stack {target.stack} --model {target.model}'",
        'exit "$failed"',
    ]
    return "\n".join(lines) + "\n"


def _shell(step: Step) -> list[str]:
    q = shlex.quote
    if isinstance(step, Apply):
        banner = [f"echo {q('=== ' + step.layout)}"] if step.layout else []
        return banner + [f"kubectl apply -f {q(step.directory + '/')}"]
    if isinstance(step, WaitForJob):
        tails = [f"  {_log_tail(tail)}" for tail in step.failure_logs]
        if step.on_failure == "stop":
            return [
                f"if ! wait_job {q(step.job)} {step.timeout_s}; then",
                *tails,
                f"  echo {q(step.label + ' did not complete; nothing was benchmarked')}",
                "  exit 1",
                "fi",
            ]
        return [
            f"if ! wait_job {q(step.job)} {step.timeout_s}; then",
            "  failed=1",
            f"  echo {q(step.label + ' did not complete; log tails, then collecting what it measured')}",
            *tails,
            "fi",
        ]
    if isinstance(step, CollectResults):
        out = q(step.directory)
        return [
            f"mkdir -p {out}",
            f'kubectl -n "$namespace" logs {q("job/" + step.job)} -c {q(step.container)} | sed -n {q(f"s/^{RESULT_LINE_PREFIX} //p")} |',
            f'  while read -r file json; do case "$file" in */*) continue ;; *.json) ;; *) continue ;; esac; printf \'%s\\n\' "$json" > {out}/"$file"; done',
        ]
    if isinstance(step, Delete):
        return [f"kubectl delete -f {q(step.directory + '/')} --wait=true"]
    raise TypeError(f"not a sweep step: {step!r}")


def _log_tail(tail: LogTail) -> str:
    which = "--all-containers=true --prefix=true" if tail.container is None else f"-c {shlex.quote(tail.container)}"
    return f'kubectl -n "$namespace" logs {shlex.quote(tail.ref)} {which} --tail={tail.lines} || true'
