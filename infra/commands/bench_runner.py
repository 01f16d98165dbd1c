"""`infra bench --apply`: run the sweep's step list (infra/tuning/sweep_steps.py) through the Kubernetes API.

The order, the deadlines and what a failure means come from `sweep_steps`; this module only says
how each step is done with the `kubernetes` client. The offline `run.sh` is generated from the
same list, so both runners do the same thing.
"""

from __future__ import annotations

import time
from pathlib import Path

from infra.commands.progress import status
from infra.errors import UserError
from infra.tuning.sweep_steps import (
    RESULT_LINE_PREFIX,
    WAIT_POLL_SECONDS,
    Apply,
    CollectResults,
    Delete,
    LogTail,
    Step,
    WaitForJob,
    sweep_steps,
)


def apply_bundle(bundle, out: Path, *, kubeconfig: Path | None, poll_seconds: float = WAIT_POLL_SECONDS) -> list[tuple[str, str]]:
    """Run every step of the sweep against the cluster of `kubeconfig`; results land in `out`.

    Returns the layouts whose sweep Job did not complete, with its state: their points so far are
    collected and the next layout still runs, but the caller must not report a clean run. A failed
    prefetch raises UserError (nothing could be measured). Whatever happens, a layout that was
    applied is deleted again, so no engine is left holding the node's GPUs.
    """
    try:
        from kubernetes import client, config
    except ImportError:
        raise UserError(
            "--apply needs the `kubernetes` Python package (pip install 'kubernetes>=31'); "
            f"or run {out}/run.sh with kubectl"
        ) from None
    try:
        config.load_kube_config(config_file=str(kubeconfig) if kubeconfig else None)
    except Exception as err:  # the client raises ConfigException and plain OSErrors
        raise UserError(f"cannot load kubeconfig ({err}); fetch it with `doctl kubernetes cluster kubeconfig save <cluster>`") from None
    runner = _ApiRunner(client.ApiClient(), bundle.target.service.namespace, out, poll_seconds)
    steps = sweep_steps(bundle)
    deletable = {s.directory for s in steps if isinstance(s, Delete)}
    applied: dict[str, Apply] = {}
    try:
        for step in steps:
            runner.run(step)
            if isinstance(step, Apply) and step.directory in deletable:
                applied[step.directory] = step
            elif isinstance(step, Delete):
                applied.pop(step.directory, None)
    finally:
        for step in applied.values():  # a step raised: free the node all the same
            runner.run(Delete(step.directory, step.objects))
    print(f"next: infra tune ingest {out}/results --stack {bundle.target.stack} --model {bundle.target.model}")
    return runner.incomplete


class _ApiRunner:
    """How each kind of step is done through the API (one instance per sweep)."""

    def __init__(self, api, namespace: str, out: Path, poll_seconds: float):
        from kubernetes import client

        self.api, self.namespace, self.out, self.poll_seconds = api, namespace, out, poll_seconds
        self.apps, self.core, self.batch = client.AppsV1Api(api), client.CoreV1Api(api), client.BatchV1Api(api)
        self.networking = client.NetworkingV1Api(api)
        self.incomplete: list[tuple[str, str]] = []

    def run(self, step: Step) -> None:
        if isinstance(step, Apply):
            print(f"=== {step.layout or 'weight prefetch'}: applying {step.directory}")
            for obj in step.objects:
                self._create(obj)
        elif isinstance(step, WaitForJob):
            self._wait(step)
        elif isinstance(step, CollectResults):
            written = sum(collect_results(log, self.out / step.directory) for log in self._logs(f"job-name={step.job}", step.container))
            print(f"    collected {written} result files into {self.out}/{step.directory}")
        elif isinstance(step, Delete):
            self._delete(step.objects)
        else:
            raise TypeError(f"not a sweep step: {step!r}")

    def _wait(self, step: WaitForJob) -> None:
        with status(f"waiting for {step.label} (at most {step.timeout_s} s)") as update:
            state = wait_job(self.batch, self.namespace, step.job, step.timeout_s, self.poll_seconds, update)
        if state == "complete":
            print(f"    job {step.job}: complete")
            return
        for tail in step.failure_logs:
            self._show_tail(tail)
        if step.on_failure == "stop":
            raise UserError(
                f"{step.label} {state}; nothing was benchmarked (see `kubectl -n {self.namespace} logs job/{step.job}`)"
            )
        self.incomplete.append((step.layout or step.job, state))
        shown = "failed (collecting what it measured)" if state == "failed" else f"{state} (collecting what it measured)"
        print(f"    job {step.job}: {shown}")

    def _create(self, obj: dict) -> None:
        from kubernetes import utils

        try:
            utils.create_from_dict(self.api, obj, namespace=obj["metadata"].get("namespace"))
        except utils.FailToCreateError as err:
            if not all(getattr(e, "status", None) == 409 for e in err.api_exceptions):  # 409: exists
                raise UserError(f"creating {obj['kind']} {obj['metadata']['name']} failed: {err}") from None

    def _logs(self, selector: str, container: str | None, *, tail: int | None = None) -> list[str]:
        """The logs of every pod `selector` matches: one container, or all of them (init first),
        each line prefixed like `kubectl logs --prefix`."""
        logs = []
        for pod in self.core.list_namespaced_pod(self.namespace, label_selector=selector).items:
            names = [container] if container else _container_names(pod)
            for name in names:
                kwargs = {"tail_lines": tail} if tail else {}
                # Unparsed: the client would otherwise json-decode a log that happens to be JSON.
                response = self.core.read_namespaced_pod_log(
                    pod.metadata.name, self.namespace, container=name, _preload_content=False, **kwargs
                )
                text = response.data.decode("utf-8", errors="replace")
                if container is None:
                    text = "".join(f"[pod/{pod.metadata.name}/{name}] {line}\n" for line in text.splitlines())
                logs.append(text)
        return logs

    def _show_tail(self, tail: LogTail) -> None:
        from kubernetes.client.rest import ApiException

        try:
            text = "".join(self._logs(tail.selector, tail.container, tail=tail.lines))
        except ApiException as err:  # like `kubectl logs ... || true`: a tail is a courtesy
            text = f"(no logs for {tail.ref}: {err.status} {err.reason})\n"
        print(f"    last {tail.lines} log lines of {tail.ref}:")
        print("".join(f"      {line}\n" for line in text.splitlines()), end="")

    def _delete(self, objects: tuple[dict, ...]) -> None:
        from kubernetes.client.rest import ApiException

        # Bodies are not parsed: the API answers a delete with a Status or with the object itself,
        # depending on the kind and on finalizers, and nothing here needs either.
        deleters = {
            "Job": lambda n, ns: self.batch.delete_namespaced_job(n, ns, propagation_policy="Background", _preload_content=False),
            "Service": lambda n, ns: self.core.delete_namespaced_service(n, ns, _preload_content=False),
            "Deployment": lambda n, ns: self.apps.delete_namespaced_deployment(n, ns, _preload_content=False),
            "NetworkPolicy": lambda n, ns: self.networking.delete_namespaced_network_policy(n, ns, _preload_content=False),
        }
        for obj in reversed(objects):
            try:
                deleters[obj["kind"]](obj["metadata"]["name"], obj["metadata"]["namespace"])
            except ApiException as err:
                if err.status != 404:
                    raise


def _container_names(pod) -> list[str]:
    spec = pod.spec
    if spec is None:
        return []
    return [c.name for c in (spec.init_containers or [])] + [c.name for c in (spec.containers or [])]


def wait_job(
    batch, namespace: str, name: str, timeout_s: float, poll_seconds: float, update=lambda text: None,
    *, clock=time.monotonic, sleep=time.sleep,
) -> str:
    """`complete`, `failed` or `timed out`, from the Job's conditions (see sweep_steps)."""
    started = clock()
    while True:
        status_ = batch.read_namespaced_job_status(name, namespace).status
        state = job_state(status_.conditions or [])
        if state:
            return state
        elapsed = clock() - started
        if elapsed >= timeout_s:
            return "timed out"
        update(f"waiting for job {name}: {elapsed:.0f} of at most {timeout_s:.0f} s")
        sleep(min(poll_seconds, max(0.0, timeout_s - elapsed)))


def job_state(conditions) -> str | None:
    """The finished state a Job's conditions report, or None while it runs."""
    for condition in conditions:
        if condition.status != "True":
            continue
        if condition.type in ("Complete", "SuccessCriteriaMet"):
            return "complete"
        if condition.type in ("Failed", "FailureTarget"):
            return "failed"
    return None


def collect_results(log: str, directory: Path) -> int:
    """Write every `BENCH_RESULT <file> <json>` line of a sweep Job's log as <directory>/<file>."""
    count = 0
    for line in log.splitlines():
        if not line.startswith(RESULT_LINE_PREFIX + " "):
            continue
        parts = line.split(" ", 2)
        if len(parts) != 3 or "/" in parts[1] or not parts[1].endswith(".json"):
            continue
        directory.mkdir(parents=True, exist_ok=True)
        (directory / parts[1]).write_text(parts[2].strip() + "\n", encoding="utf-8")
        count += 1
    return count
