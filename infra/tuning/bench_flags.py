"""The options `vllm bench serve` accepts in the pinned vLLM release, read from the wheel's source.

Why: the benchmark Job's command line is only executed on the cluster, after a model load that
takes tens of minutes; a flag the pinned release does not know fails the Job there. The
release's own parser source is read (AST only; nothing imported or executed) and the result kept
in `vllm_bench_flags.json` next to this module, so tests check every rendered flag offline.

The pinned release builds the parser in `vllm/benchmarks/serve.py` (`add_cli_args`, which first
calls `add_dataset_parser` from `vllm/benchmarks/datasets/datasets.py`; older releases had a
single `vllm/benchmarks/datasets.py`). Every `add_argument("--flag", ...)` in those files counts.

Regenerate when `VLLM_VERSION` changes (the same wheel scripts/extract_vllm_flags.py downloads):
    python -m infra.tuning.bench_flags --wheel /path/to/vllm-<version>-*.whl
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import zipfile
from functools import cache
from pathlib import Path

FLAGS_FILE = Path(__file__).with_name("vllm_bench_flags.json")
_SOURCES = ("vllm/benchmarks/serve.py", "vllm/benchmarks/datasets/datasets.py", "vllm/benchmarks/datasets.py")


def extract(wheel: Path) -> dict:
    """{"vllm_version", "wheel", "wheel_sha256", "flags": [...], "dataset_names": [...]}."""
    flags: set[str] = set()
    dataset_names: list[str] = []
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for source in _SOURCES:
            if source not in names:
                continue
            tree = ast.parse(zf.read(source).decode("utf-8"))
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument"):
                    continue
                options = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                flags.update(o for o in options if o.startswith("--"))
                if "--dataset-name" in options:
                    for kw in node.keywords:
                        if kw.arg == "choices" and isinstance(kw.value, ast.List):
                            dataset_names = [e.value for e in kw.value.elts if isinstance(e, ast.Constant)]
    if "--request-rate" not in flags:
        raise SystemExit("no `vllm bench serve` parser found in the wheel: the source moved, update _SOURCES")
    return {
        "vllm_version": wheel.name.split("-")[1],
        "wheel": wheel.name,
        "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "generated_by": "python -m infra.tuning.bench_flags",
        "flags": sorted(flags),
        "dataset_names": dataset_names,
    }


@cache
def known_bench_flags() -> dict:
    """The stored extraction for the pinned release."""
    return json.loads(FLAGS_FILE.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", type=Path, required=True, help="the pinned vLLM wheel")
    args = parser.parse_args(argv)
    FLAGS_FILE.write_text(json.dumps(extract(args.wheel), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {FLAGS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
