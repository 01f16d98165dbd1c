#!/usr/bin/env python3
"""checkov over the rendered Kubernetes objects of every shipped stack and every variant.

    .venv/bin/python scripts/scan_security.py [--checkov PATH] [NAME ...]

Plans each stack offline (tests/security_variants.py: dev, staging, prod, and the public-router,
gateway, P/D, multi-node, Spaces, GPU-operator and endpoints variants), writes its objects as
YAML, runs checkov 3.3.30's Kubernetes framework on them and fails (exit 1) on any failed check. An
accepted finding is not a failure only when the object carries checkov's skip annotation with a
written reason (`checkov.io/skip<N>: CKV_K8S_<id>=<reason>`, added where the object is rendered by
infra/render/scan_exceptions.py). Also failures (issue 35): a skip without a reason; a skip whose
reason the object contradicts (`scan_exceptions.contradictions`: the claim re-derived from the
object); and a skip checkov does not need — checkov runs a second time over the objects with every
skip stripped, and each skip must excuse a check that then fails. Helm charts' own objects are not
in the plan yet and are not scanned.

checkov is not a project dependency (its pins clash with ours): `.ci/run` installs it into a venv
of its own; `--checkov` or $CHECKOV names the executable (default: `checkov` on PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHECKOV_VERSION = "3.3.30"


def write_objects(objects: list[dict], out: Path) -> int:
    import yaml

    out.mkdir(parents=True, exist_ok=True)
    for i, obj in enumerate(objects):
        meta = obj["metadata"]
        name = f"{i:03d}-{obj['kind'].lower()}-{meta.get('namespace', 'cluster')}-{meta['name']}.yaml"
        (out / name).write_text(yaml.safe_dump(obj, sort_keys=True))
    return len(objects)


def run_checkov(checkov: str, directory: Path) -> dict:
    proc = subprocess.run(
        [checkov, "--directory", str(directory), "--framework", "kubernetes", "--output", "json",
         "--compact", "--skip-download"],
        capture_output=True, text=True, check=False, env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )  # fmt: skip
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        raise SystemExit(f"checkov failed to run (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    data = json.loads(proc.stdout)
    if isinstance(data, list):  # one report per framework
        data = next((d for d in data if d.get("check_type") == "kubernetes"), data[0])
    return data


def findings(report: dict) -> tuple[list[str], list[str], int, int]:
    """(failures, skips without a reason, passed count, skipped count) of one checkov report."""
    results = report.get("results", {}) if isinstance(report, dict) else {}
    failed = [f"{c['check_id']} {c['resource']} ({c.get('check_name', '')})" for c in results.get("failed_checks", [])]
    skipped = results.get("skipped_checks", [])
    bare = [
        f"{c['check_id']} {c['resource']}: skip without a reason"
        for c in skipped
        if not (c.get("check_result", {}).get("suppress_comment") or "").strip()
        or (c.get("check_result", {}).get("suppress_comment") or "").strip().lower() == "no comment provided"
    ]
    return failed, bare, len(results.get("passed_checks", [])), len(skipped)


def strip_skips(objects: list[dict]) -> list[dict]:
    """The objects without their checkov skip annotations (deep enough: metadata copied)."""
    from infra.render.scan_exceptions import ANNOTATION_PREFIX

    out = []
    for obj in objects:
        meta = dict(obj.get("metadata") or {})
        meta["annotations"] = {k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith(ANNOTATION_PREFIX)}
        out.append({**obj, "metadata": meta})
    return out


def unneeded_skips(objects: list[dict], stripped_report: dict) -> list[str]:
    """Skips whose check passes on the object without any skip: they excuse nothing."""
    from infra.render.scan_exceptions import skips_on

    failing: dict[str, set[str]] = {}
    for c in (stripped_report.get("results") or {}).get("failed_checks", []):
        failing.setdefault(c["resource"], set()).add(c["check_id"])
    out = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        resource = f"{obj['kind']}.{meta.get('namespace', 'default')}.{meta['name']}"
        for check, _ in skips_on(obj):
            if check not in failing.get(resource, set()):
                out.append(f"{check} {resource}: skip not needed (the check passes without it)")
    return out


def main(argv: list[str] | None = None) -> int:
    from tests.security_variants import NAMES, plan_named

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"stacks/variants (default: all of {', '.join(NAMES)})")
    parser.add_argument("--checkov", default=os.environ.get("CHECKOV") or shutil.which("checkov"))
    args = parser.parse_args(argv)
    if not args.checkov:
        print(f"checkov not found: pip install checkov=={CHECKOV_VERSION} (its own venv) or pass --checkov", file=sys.stderr)
        return 2
    from infra.offline import kubernetes_objects
    from infra.render.scan_exceptions import contradictions

    bad = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="scan-security-") as tmp:
        for name in args.names or NAMES:
            t0 = time.monotonic()
            plan = plan_named(name, Path(tmp) / "plans")
            objects = kubernetes_objects(plan)
            count = write_objects(objects, Path(tmp) / name)
            failed, bare, passed, skipped = findings(run_checkov(args.checkov, Path(tmp) / name))
            contradicted = [f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}: {c}" for o in objects
                            for c in contradictions(o)]  # fmt: skip
            write_objects(strip_skips(objects), Path(tmp) / f"{name}-stripped")
            unneeded = unneeded_skips(objects, run_checkov(args.checkov, Path(tmp) / f"{name}-stripped"))
            problems = failed + bare + contradicted + unneeded
            status = "ok" if not problems else "FAILED"
            print(f"{name}: {count} objects, {passed} passed, {skipped} skipped with a reason, {len(failed)} failed, "
                  f"{len(contradicted)} reasons contradicted, {len(unneeded)} skips not needed [{status}] ({time.monotonic() - t0:.1f} s)")
            for line in problems:
                print(f"  {line}")
            bad += len(problems)
    print(f"scan: {bad} failure(s) in {time.monotonic() - started:.1f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
