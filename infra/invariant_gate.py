"""The whole-plan invariants before `pulumi up` declares anything.

The invariants read the objects the program declares, which only the mock runtime records; the
real program runs under the real Pulumi engine, whose runtime state is process-global (settings,
the monitor, the event loop). Swapping the mock runtime in and out inside the engine's process is
not sound, so the check runs in a fresh interpreter: it gets the config values the engine handed
the program (secrets already dropped, `values_from_pulumi_runtime`), plans and declares the same
StackPlan under the mock runtime (`infra.offline.offline_plan`, exactly what `infra plan` does) and
answers with the problems as JSON. `infra/__main__.py` raises them as one ConfigError before
`declare`, so a plan that breaks an invariant never half-applies. It costs one offline plan (a few
seconds) per `pulumi preview` / `pulumi up`.

    python -m infra.invariant_gate < {"values": {...}, "stack": ..., "secret_keys": [...], "base_dir": ...}
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from infra.errors import Problem


class GateFailed(RuntimeError):
    """The check itself crashed (a bug): `pulumi up` must not go on as if it had passed."""


def problems_before_up(values: dict[str, Any], stack: str, secret_keys: set[str], base_dir: Path) -> list[Problem]:
    """The invariants' problems for these config values, from a fresh interpreter."""
    request = {"values": values, "stack": stack, "secret_keys": sorted(secret_keys), "base_dir": str(base_dir)}
    proc = subprocess.run(
        [sys.executable, "-m", "infra.invariant_gate"], input=json.dumps(request), capture_output=True, text=True,
        cwd=base_dir, timeout=600, check=False,
    )
    try:
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        tail = "\n".join((proc.stderr or "").strip().splitlines()[-5:])
        raise GateFailed(f"the whole-plan check before `pulumi up` failed (exit {proc.returncode}): {tail}") from None
    return [Problem(path, message) for path, message in answer["problems"]]


def main() -> int:
    from infra.config import load_config
    from infra.errors import UserError
    from infra.offline import offline_plan
    from infra.stack_plan import plan_stack

    request = json.load(sys.stdin)
    try:
        cfg = load_config(request["values"], stack=request["stack"], secret_keys=set(request["secret_keys"]),
                          base_dir=Path(request["base_dir"]), source=f"stack {request['stack']}")
        offline_plan(plan_stack(cfg), deploy=True)
    except UserError as err:
        print(json.dumps({"problems": [[p.path, p.message] for p in err.problems]}))
        return 0
    print(json.dumps({"problems": []}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
