"""`infra bench --apply` against a stand-in Kubernetes API server (the real `kubernetes` client).

The server keeps the objects it is sent, reports Jobs finished through their conditions, serves
the sweep pod's log with BENCH_RESULT lines as the sweep script prints them, and records deletes,
so the test sees the whole exchange: what is created in which order, what is collected, what is
cleaned up, and what a failure looks like to the user.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from werkzeug import Response

pytest.importorskip("kubernetes")

from infra.commands import bench as bench_cmd  # noqa: E402
from infra.commands import bench_runner  # noqa: E402
from infra.errors import UserError  # noqa: E402
from infra.tuning.sweep_steps import Apply, Delete, LogTail, WaitForJob, sweep_steps  # noqa: E402
from tests.tuning.test_bench import _bundle, step_trace  # noqa: E402

RESULT = {"request_rate": 2.0, "completed": 100, "failed": 0, "p90_ttft_ms": 800.0, "p90_tpot_ms": 30.0}
_PATH = re.compile(r"^/(?:api/v1|apis/(?:apps|batch|networking\.k8s\.io)/v1)/namespaces/(?P<ns>[^/]+)/(?P<plural>[a-z]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[a-z]+))?$")


class FakeKubernetes:
    """Just enough of the API for create / job status / pod list / pod log / delete."""

    def __init__(self, *, job_outcome="Complete", prefetch_outcome="Complete", create_status=None):
        self.objects: dict[tuple[str, str], dict] = {}
        self.created: list[str] = []
        self.deleted: list[str] = []
        self.job_outcome = job_outcome
        self.prefetch_outcome = prefetch_outcome
        self.create_status = create_status or {}
        self.auth: set[str] = set()
        self.events: list[tuple] = []  # every request, in order, for the trace test

    def handle(self, request):
        self.auth.add(request.headers.get("Authorization", ""))
        match = _PATH.match(request.path)
        if not match:
            return self._status(404, f"no route {request.path}")
        plural, name, sub = match["plural"], match["name"], match["sub"]
        if request.method == "POST":
            body = json.loads(request.data)
            key = f"{body['kind']}/{body['metadata']['name']}"
            status = self.create_status.get(key)
            if status:
                return self._status(status, f"{key}: refused")
            self.created.append(key)
            self.events.append(("create", key))
            self.objects[(plural, body["metadata"]["name"])] = body
            return Response(json.dumps(body), status=201, content_type="application/json")
        if request.method == "DELETE":
            self.deleted.append(f"{plural}/{name}")
            self.events.append(("delete", f"{plural}/{name}"))
            self.objects.pop((plural, name), None)
            return self._status(200, "deleted")
        if plural == "jobs" and sub == "status":
            self.events.append(("status", name))
            job = self.objects[("jobs", name)]
            outcome = self.prefetch_outcome if "prefetch" in name else self.job_outcome
            job = dict(job, status={"conditions": [{"type": outcome, "status": "True"}]})
            return Response(json.dumps(job), content_type="application/json")
        if plural == "pods" and name is None:
            selector = request.args["labelSelector"]
            self.events.append(("pods", selector))
            if selector.startswith("job-name="):
                pod = {"metadata": {"name": f"{selector.removeprefix('job-name=')}-abcde"},
                       "spec": {"initContainers": [{"name": "wait-for-replicas"}], "containers": [{"name": "bench"}]}}
            else:
                pod = {"metadata": {"name": "engine-abcde"}, "spec": {"containers": [{"name": "vllm"}]}}
            pods = {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [pod]}
            return Response(json.dumps(pods), content_type="application/json")
        if plural == "pods" and sub == "log":
            container = request.args["container"]
            self.events.append(("log", name, container, request.args.get("tailLines")))
            if container == "vllm":
                return Response("engine: HIP out of memory\n", content_type="text/plain")
            if container == "wait-for-replicas":
                return Response("2 of 2 replicas ready\n", content_type="text/plain")
            lines = [
                "waiting for 2 of 2 replicas ready",
                f"BENCH_RESULT rate-2.json {json.dumps(RESULT)}",
                f"BENCH_RESULT rate-4.json {json.dumps(dict(RESULT, request_rate=4.0))}",
                "BENCH_RESULT ../escape.json {}",
            ]
            return Response("\n".join(lines) + "\n", content_type="text/plain")
        return self._status(404, f"unexpected {request.method} {request.path}")

    @staticmethod
    def _status(code, message):
        body = {"kind": "Status", "apiVersion": "v1", "status": "Failure" if code >= 400 else "Success", "message": message, "code": code}
        return Response(json.dumps(body), status=code, content_type="application/json")


@pytest.fixture
def cluster(httpserver, tmp_path):
    def start(**kwargs):
        fake = FakeKubernetes(**kwargs)
        httpserver.clear_all_handlers()
        httpserver.expect_request(re.compile(".*")).respond_with_handler(fake.handle)
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "doks", "cluster": {"server": httpserver.url_for("").rstrip("/")}}],
                    "users": [{"name": "admin", "user": {"token": "k8s-token"}}],
                    "contexts": [{"name": "doks", "context": {"cluster": "doks", "user": "admin"}}],
                    "current-context": "doks",
                }
            )
        )
        return fake, kubeconfig

    return start


def test_apply_runs_each_layout_collects_results_and_cleans_up(cluster, tmp_path, capsys):
    fake, kubeconfig = cluster()
    bundle = _bundle()
    assert bench_cmd.apply_bundle(bundle, tmp_path / "out", kubeconfig=kubeconfig, poll_seconds=0) == []

    assert fake.auth == {"Bearer k8s-token"}
    prefetch = f"Job/{bundle.prefetch['metadata']['name']}"
    first, second = ([f"{o['kind']}/{o['metadata']['name']}" for o in objs] for _, objs in bundle.layouts)
    # the prefetch first, then one layout at a time: created, measured, deleted before the next
    assert fake.created == [prefetch, *first, *second]
    plural = {"Deployment": "deployments", "Service": "services", "Job": "jobs", "NetworkPolicy": "networkpolicies"}
    deleted_first = [f"{plural[k.split('/')[0]]}/{k.split('/')[1]}" for k in reversed(first)]
    assert fake.deleted[: len(first)] == deleted_first
    assert len(fake.deleted) == len(first) + len(second)
    assert ("jobs", bundle.prefetch["metadata"]["name"]) in fake.objects  # the cache fill stays

    for sweep in bundle.sweeps:
        results = tmp_path / "out" / "results" / sweep.layout.name
        assert sorted(p.name for p in results.iterdir()) == ["rate-2.json", "rate-4.json"]
        assert json.loads((results / "rate-4.json").read_text())["request_rate"] == 4.0
    assert not (tmp_path / "out" / "escape.json").exists()
    out = capsys.readouterr().out
    assert "collected 2 result files" in out and "next: infra tune ingest" in out


def test_a_failed_sweep_still_collects_and_deletes(cluster, tmp_path, capsys):
    fake, kubeconfig = cluster(job_outcome="Failed")
    bundle = _bundle()
    incomplete = bench_cmd.apply_bundle(bundle, tmp_path / "out", kubeconfig=kubeconfig, poll_seconds=0)
    assert incomplete == [(s.layout.name, "failed") for s in bundle.sweeps]
    out = capsys.readouterr().out
    assert "failed (collecting what it measured)" in out
    # the tails kubectl would show: every container of the Job's pod, prefixed, and the engine's
    assert "[pod/qwen3-235b-bench-tp4-ep-r2-sweep-abcde/wait-for-replicas] 2 of 2 replicas ready" in out
    assert "engine: HIP out of memory" in out
    assert (tmp_path / "out" / "results" / bundle.sweeps[0].layout.name / "rate-2.json").exists()
    assert len(fake.deleted) == sum(len(objs) for _, objs in bundle.layouts)


def test_a_failed_prefetch_stops_before_any_layout_is_deployed(cluster, tmp_path):
    fake, kubeconfig = cluster(prefetch_outcome="Failed")
    bundle = _bundle()
    with pytest.raises(UserError, match=r"weight prefetch job .* failed; nothing was benchmarked"):
        bench_cmd.apply_bundle(bundle, tmp_path / "out", kubeconfig=kubeconfig, poll_seconds=0)
    assert fake.created == [f"Job/{bundle.prefetch['metadata']['name']}"]


def test_objects_left_from_an_earlier_run_are_reused_but_other_refusals_are_errors(cluster, tmp_path):
    bundle = _bundle()
    deployment = next(o for o in bundle.layouts[0][1] if o["kind"] == "Deployment")
    key = f"Deployment/{deployment['metadata']['name']}"
    fake, kubeconfig = cluster(create_status={key: 409})
    bench_cmd.apply_bundle(bundle, tmp_path / "out", kubeconfig=kubeconfig, poll_seconds=0)
    assert key not in fake.created and len(fake.created) == 1 + sum(len(o) for _, o in bundle.layouts) - 1

    fake, kubeconfig = cluster(create_status={key: 403})
    with pytest.raises(UserError, match=rf"creating Deployment {deployment['metadata']['name']} failed"):
        bench_cmd.apply_bundle(bundle, tmp_path / "out2", kubeconfig=kubeconfig, poll_seconds=0)


def test_a_missing_kubeconfig_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="cannot load kubeconfig"):
        bench_cmd.apply_bundle(_bundle(), tmp_path / "out", kubeconfig=tmp_path / "nope", poll_seconds=0)


def test_job_state_reads_conditions_not_pod_counters():
    class C:
        def __init__(self, type_, status="True"):
            self.type, self.status = type_, status

    assert bench_runner.job_state([]) is None
    assert bench_runner.job_state([C("Failed", "False")]) is None
    assert bench_runner.job_state([C("SuccessCriteriaMet"), C("Complete")]) == "complete"
    assert bench_runner.job_state([C("FailureTarget")]) == "failed"


def test_the_kubeconfig_path_is_what_the_cli_passes(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(bench_cmd, "apply_bundle", lambda bundle, out, kubeconfig: seen.update(out=out, kubeconfig=kubeconfig))
    from tests.tuning.test_bench import _run

    (tmp_path / "kc").write_text("apiVersion: v1\nkind: Config\n")
    _run(["bench", "staging", "qwen3-235b", "--layouts", "tp8-ep-r1", "--out", str(tmp_path / "o"), "--apply", "--kubeconfig", str(tmp_path / "kc")])
    assert seen == {"out": tmp_path / "o", "kubeconfig": Path(tmp_path / "kc")}


def test_an_incomplete_sweep_makes_the_command_fail(monkeypatch, tmp_path, capsys):
    # The other layouts ran and their points were collected, but scripts and CI must see it.
    monkeypatch.setattr(bench_cmd, "apply_bundle", lambda bundle, out, kubeconfig: [("tp8-ep-r1", "timed out")])
    (tmp_path / "kc").write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kc"))
    from tests.tuning.test_bench import _run

    code = _run(["bench", "staging", "qwen3-235b", "--layouts", "tp8-ep-r1", "--out", str(tmp_path / "o"), "--apply"])
    assert code == 1
    assert "1 of 1 layout sweeps did not complete: tp8-ep-r1 (timed out)" in capsys.readouterr().err


def _api_trace(fake: FakeKubernetes, steps) -> list[tuple[str, str]]:
    """The stand-in API server's requests as (action, target), in the vocabulary of `step_trace`."""
    directory_of = {}
    for step in steps:
        if isinstance(step, Apply | Delete):
            plural = {"Deployment": "deployments", "Service": "services", "Job": "jobs", "NetworkPolicy": "networkpolicies"}
            for obj in step.objects:
                directory_of[f"{obj['kind']}/{obj['metadata']['name']}"] = step.directory
                directory_of[f"{plural[obj['kind']]}/{obj['metadata']['name']}"] = step.directory
    ref_of = {t.selector: t.ref for s in steps if isinstance(s, WaitForJob) for t in s.failure_logs}
    trace, selector = [], None
    for event in fake.events:
        if event[0] == "create":
            item = ("apply", directory_of[event[1]])
        elif event[0] == "delete":
            item = ("delete", directory_of[event[1]])
        elif event[0] == "status":
            item = ("wait", event[1])
        elif event[0] == "pods":
            selector = event[1]
            continue
        elif event[3] is not None:  # a log tail
            item = ("logs", ref_of[selector])
        else:
            item = ("collect", selector.removeprefix("job-name="))
        if not trace or trace[-1] != item:
            trace.append(item)
    return trace


@pytest.mark.parametrize(("outcomes", "failing"), [
    ({}, set()),
    ({"job_outcome": "Failed"}, {"qwen3-235b-bench-tp4-ep-r2-sweep", "qwen3-235b-bench-tp8-ep-r1-sweep"}),
    ({"prefetch_outcome": "Failed"}, {"qwen3-235b-bench-prefetch"}),
])
def test_apply_follows_the_step_list(cluster, tmp_path, outcomes, failing):
    """The same list, the same trace as run.sh (tests/tuning/test_bench.py::test_run_sh_follows_the_step_list)."""
    fake, kubeconfig = cluster(**outcomes)
    bundle = _bundle()
    try:
        bench_cmd.apply_bundle(bundle, tmp_path / "out", kubeconfig=kubeconfig, poll_seconds=0)
    except UserError:
        assert "qwen3-235b-bench-prefetch" in failing
    assert _api_trace(fake, sweep_steps(bundle)) == step_trace(sweep_steps(bundle), failing=failing)


def test_a_step_that_raises_still_deletes_the_applied_layout(cluster, tmp_path, monkeypatch):
    fake, kubeconfig = cluster()
    bundle = _bundle()

    def broken_collect(log, directory):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bench_runner, "collect_results", broken_collect)
    with pytest.raises(OSError):
        bench_cmd.apply_bundle(bundle, tmp_path / "out", kubeconfig=kubeconfig, poll_seconds=0)
    first = bundle.layouts[0][1]
    assert len(fake.deleted) == len(first)  # the first layout is gone; the second never started
    assert not any(o["metadata"]["name"] in str(fake.created) for o in bundle.layouts[1][1])


def test_a_wait_times_out_at_the_step_deadline():
    """A Job that never finishes: the runner gives up at the step's timeout, having polled."""
    class Batch:
        reads = 0

        def read_namespaced_job_status(self, name, namespace):
            Batch.reads += 1
            return type("Job", (), {"status": type("S", (), {"conditions": []})()})()

    ticks = iter(range(0, 1000, 10))  # each clock read is 10 s later: no real waiting
    naps = []
    state = bench_runner.wait_job(Batch(), "inference", "j", 35, 10, clock=lambda: next(ticks), sleep=naps.append)
    assert state == "timed out"
    assert Batch.reads == 4 and naps == [10, 10, 5]  # read at 10, 20, 30 s; the last nap ends at 35 s
    assert LogTail("job/j", "job-name=j").lines == 40


def test_apply_with_a_missing_kubeconfig_writes_nothing(tmp_path, capsys):
    # Found out only after the manifests were written, the run left a directory behind for nothing.
    from tests.tuning.test_bench import _run

    with pytest.raises(UserError, match=r"--kubeconfig /nonexistent: no such file"):
        _run(["bench", "staging", "qwen3-235b", "--out", str(tmp_path / "o"), "--apply", "--kubeconfig", "/nonexistent"])
    assert not (tmp_path / "o").exists()
