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
from infra.errors import UserError  # noqa: E402
from tests.tuning.test_bench import _bundle  # noqa: E402

RESULT = {"request_rate": 2.0, "completed": 100, "failed": 0, "p90_ttft_ms": 800.0, "p90_tpot_ms": 30.0}
_PATH = re.compile(r"^/(?:api/v1|apis/(?:apps|batch)/v1)/namespaces/(?P<ns>[^/]+)/(?P<plural>[a-z]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[a-z]+))?$")


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
            self.objects[(plural, body["metadata"]["name"])] = body
            return Response(json.dumps(body), status=201, content_type="application/json")
        if request.method == "DELETE":
            self.deleted.append(f"{plural}/{name}")
            self.objects.pop((plural, name), None)
            return self._status(200, "deleted")
        if plural == "jobs" and sub == "status":
            job = self.objects[("jobs", name)]
            outcome = self.prefetch_outcome if "prefetch" in name else self.job_outcome
            job = dict(job, status={"conditions": [{"type": outcome, "status": "True"}]})
            return Response(json.dumps(job), content_type="application/json")
        if plural == "pods" and name is None:
            job = request.args["labelSelector"].removeprefix("job-name=")
            pods = {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [{"metadata": {"name": f"{job}-abcde"}}]}
            return Response(json.dumps(pods), content_type="application/json")
        if plural == "pods" and sub == "log":
            assert request.args["container"] == "bench"
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
    plural = {"Deployment": "deployments", "Service": "services", "Job": "jobs"}
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
    assert "failed (collecting what it measured)" in capsys.readouterr().out
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

    assert bench_cmd.job_state([]) is None
    assert bench_cmd.job_state([C("Failed", "False")]) is None
    assert bench_cmd.job_state([C("SuccessCriteriaMet"), C("Complete")]) == "complete"
    assert bench_cmd.job_state([C("FailureTarget")]) == "failed"


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


def test_apply_with_a_missing_kubeconfig_writes_nothing(tmp_path, capsys):
    # Found out only after the manifests were written, the run left a directory behind for nothing.
    from tests.tuning.test_bench import _run

    with pytest.raises(UserError, match=r"--kubeconfig /nonexistent: no such file"):
        _run(["bench", "staging", "qwen3-235b", "--out", str(tmp_path / "o"), "--apply", "--kubeconfig", "/nonexistent"])
    assert not (tmp_path / "o").exists()
