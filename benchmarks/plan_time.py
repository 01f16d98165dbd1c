"""How long `infra plan` takes, and how it scales with the number of models.

Each measurement runs `python -m infra.cli plan STACK --json FILE --quiet --root DIR` in a fresh
process (so imports and the mock runtime are included, as a user sees them), REPEATS times, and
reports the median wall time and the median peak RSS (from the child's rusage). Generated stacks
take the prod stack and serve N models, one GPU pool per model. The scaling ratio compares the
per-model increment between the 10- and 50-model stacks with the 1-to-10 increment: ~1.0 means
linear.

    python benchmarks/plan_time.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CATALOG_SOURCES = [
    ("Qwen/Qwen3-8B", {"input_tokens": 1000, "output_tokens": 200}),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", {"input_tokens": 1500, "output_tokens": 250}),
    ("meta-llama/Llama-3.1-8B-Instruct", {"input_tokens": 1000, "output_tokens": 200}),
    ("Qwen/Qwen3-32B", {"input_tokens": 2000, "output_tokens": 300}),
]


def generated_stack(n_models: int) -> dict:
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
    cfg = doc["config"]
    pools, models = [], []
    for i in range(n_models):
        source, workload = CATALOG_SOURCES[i % len(CATALOG_SOURCES)]
        pools.append({"name": f"pool-{i}", "size": "gpu-mi300x8-1536gb", "nodes": 1})
        models.append({
            "name": f"model-{i}", "source": source, "pool": f"pool-{i}", "layout": "auto",
            "served_model_name": f"model-{i}", "workload": dict(workload, peak_rps=5),
            "slo": {"ttft_p90_ms": 1000, "tpot_p90_ms": 50},
        })
    cfg["inference-platform:gpu_pools"] = pools
    cfg["inference-platform:models"] = models
    return copy.deepcopy(doc)


def measure(stack: str, root: Path, repeats: int) -> tuple[float, float]:
    times, rss = [], []
    for _ in range(repeats):
        out = Path(tempfile.mkstemp(suffix=".json")[1])
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "infra.cli", "plan", stack, "--json", str(out), "--quiet", "--root", str(root)],
                       check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        times.append(time.perf_counter() - start)
        rss.append(max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) / 1024)
        out.unlink()
    return statistics.median(times), statistics.median(rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    print(f"{'stack':<14}{'models':>7}{'median s':>10}{'peak RSS MiB':>14}")
    results = {}
    for stack in ("dev", "staging", "prod"):
        t, m = measure(stack, ROOT, args.repeats)
        print(f"{stack:<14}{'':>7}{t:>10.2f}{m:>14.0f}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "stacks").mkdir()
        # --root must be a project directory: the CLI refuses one without this project's Pulumi.yaml.
        (root / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
        for n in (1, 10, 50):
            (root / "stacks" / f"Pulumi.gen{n}.yaml").write_text(yaml.safe_dump(generated_stack(n)))
            t, m = measure(f"gen{n}", root, args.repeats)
            results[n] = t
            print(f"{'gen' + str(n):<14}{n:>7}{t:>10.2f}{m:>14.0f}")
    per_model_small = (results[10] - results[1]) / 9
    per_model_large = (results[50] - results[10]) / 40
    print(f"per-model increment: 1→10 {per_model_small * 1000:.0f} ms, 10→50 {per_model_large * 1000:.0f} ms, "
          f"ratio {per_model_large / per_model_small:.2f} (≈1 is linear)")


if __name__ == "__main__":
    main()
