"""Issue 30: checkov 3.3.30 over the rendered objects of dev, staging, prod and every variant finds
nothing without a written reason (scripts/scan_security.py, also run by .ci/run). Marker
`checkov`: needs the checkov executable ($CHECKOV or on PATH; its own venv, see the script)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT, apply, need_tool

CHECKOV = os.environ.get("CHECKOV") or shutil.which("checkov")


@apply(need_tool(CHECKOV or "checkov", "pip install checkov==3.3.30 in a venv of its own; CHECKOV=path", "checkov"))
def test_checkov_finds_nothing_without_a_written_reason():
    proc = subprocess.run([sys.executable, "scripts/scan_security.py", "--checkov", CHECKOV or "checkov"], cwd=ROOT,
                          capture_output=True, text=True, check=False, timeout=1800)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_scanner_reads_checkov_reports():
    """The report parsing, on checkov's JSON shape: failures fail, a skip needs its reason."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from scan_security import findings

    report = {"results": {
        "passed_checks": [{"check_id": "CKV_K8S_1"}],
        "failed_checks": [{"check_id": "CKV_K8S_8", "resource": "Deployment.inference.router", "check_name": "Liveness"}],
        "skipped_checks": [
            {"check_id": "CKV_K8S_43", "resource": "Deployment.inference.x", "check_result": {"suppress_comment": "tags pinned in versions.py"}},
            {"check_id": "CKV_K8S_14", "resource": "Deployment.inference.y", "check_result": {"suppress_comment": "No comment provided"}},
        ],
    }}  # fmt: skip
    failed, bare, passed, skipped = findings(report)
    assert failed == ["CKV_K8S_8 Deployment.inference.router (Liveness)"] and passed == 1 and skipped == 2
    assert bare == ["CKV_K8S_14 Deployment.inference.y: skip without a reason"]


# --------------------------------------------------------------------------- issue 35: true reasons


@pytest.fixture(scope="module")
def scanned_objects(tmp_path_factory):
    from infra.offline import kubernetes_objects
    from tests.security_variants import NAMES, plan_named

    root = tmp_path_factory.mktemp("scan")
    return {name: kubernetes_objects(plan_named(name, root)) for name in NAMES}


def test_no_skip_reason_is_contradicted_by_its_object(scanned_objects):
    """Every skip on every object of every stack and variant: a known check, a claim the object
    bears out (so the skip excuses something), and words that are what the object says."""
    from infra.render.scan_exceptions import contradictions, skips_on

    total = 0
    for name, objects in scanned_objects.items():
        for obj in objects:
            total += len(skips_on(obj))
            assert contradictions(obj) == [], (name, obj["kind"], obj["metadata"]["name"])
    assert total > 300


def test_each_skip_names_one_check_and_a_reason(scanned_objects):
    from infra.render.scan_exceptions import ANNOTATION_PREFIX

    for objects in scanned_objects.values():
        for obj in objects:
            for key, value in ((obj.get("metadata") or {}).get("annotations") or {}).items():
                if key.startswith(ANNOTATION_PREFIX):
                    check, _, reason = value.partition("=")
                    assert re.fullmatch(r"CKV_K8S_\d+", check) and len(reason) > 20, value


def test_the_router_probe_skips_name_the_container_that_has_none(scanned_objects):
    """Issue 35: the router's CKV_K8S_8/9 skip said the router was probed while its probes were
    broken and the client proxy had none; now the reason names the unprobed container (the
    registrar) and the probed ones, re-derived from the object."""
    (router,) = [o for o in scanned_objects["prod"] if o["kind"] == "Deployment" and o["metadata"]["name"] == "router"]
    skips = dict(tuple(v.split("=", 1)) for k, v in router["metadata"]["annotations"].items() if k.startswith("checkov.io/skip"))
    assert skips["CKV_K8S_8"].startswith("no livenessProbe on registrar:") and "client-proxy, router have one" in skips["CKV_K8S_8"]
    assert skips["CKV_K8S_9"].startswith("no readinessProbe on registrar:")


def test_digest_skips_name_every_tag_only_image_and_prod_notes_them_all(scanned_objects, tmp_path):
    """Issue 35: 'prod warns on tag-only images' warned for 2 of 5 (nginx-unprivileged, busybox and
    pause were silent) and called python:3.12-slim-bookworm pinned."""
    from infra.invariants.images import tag_only_images
    from infra.offline import build_plan

    objects = scanned_objects["prod"]
    named = set()
    for obj in objects:
        for k, v in ((obj.get("metadata") or {}).get("annotations") or {}).items():
            if k.startswith("checkov.io/skip") and v.startswith("CKV_K8S_43="):
                named |= set(v.split(": ", 1)[1].split(" (tags", 1)[0].split(", "))
    images = set(tag_only_images(objects))
    assert {"busybox:1.37.0", "nginxinc/nginx-unprivileged:1.28.0-alpine", "registry.k8s.io/pause:3.10",
            "python:3.12-slim-bookworm"} <= images and named == images  # fmt: skip
    notes = " ".join(build_plan("prod", ROOT).summary["notes"])
    assert all(image in notes for image in images), notes


def test_a_skip_is_attached_only_where_the_object_has_what_the_check_flags():
    """Unneeded skips go: one GPU adds no capability (no CKV_K8S_25), every engine drops ALL (no
    CKV_K8S_37), the node-tuning agent mounts no token (no CKV_K8S_38), a prefetch without a
    Hugging Face token reads no Secret from env (no CKV_K8S_35), a digest-pinned image needs no
    CKV_K8S_43."""
    from infra.render.scan_exceptions import ENGINE, NODE_AGENT, annotations

    def checks(obj, family):
        return {v.split("=", 1)[0] for v in annotations(obj, family).values()}

    one_gpu = {"kind": "Deployment", "spec": {"template": {"spec": {"containers": [
        {"name": "vllm", "image": "vllm/vllm-openai-rocm@sha256:" + "a" * 64,
         "securityContext": {"capabilities": {"drop": ["ALL"]}}}]}}}}  # fmt: skip
    got = checks(one_gpu, ENGINE)
    assert not {"CKV_K8S_25", "CKV_K8S_37", "CKV_K8S_43", "CKV_K8S_35"} & got and "CKV_K8S_11" in got
    one_gpu["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = ["SYS_PTRACE"]
    assert "CKV_K8S_25" in checks(one_gpu, ENGINE)
    agent = {"kind": "DaemonSet", "spec": {"template": {"spec": {"automountServiceAccountToken": False,
                                                                 "containers": [{"name": "a", "image": "busybox:1.37.0"}]}}}}  # fmt: skip
    assert "CKV_K8S_38" not in checks(agent, NODE_AGENT)
