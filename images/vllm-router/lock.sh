#!/usr/bin/env bash
# Regenerate requirements.txt: resolve vllm-router==$VERSION for CPython 3.12 / manylinux x86_64
# with pip's own resolver (a dry run; nothing is installed) and write every wheel with its sha256.
set -euo pipefail
cd "$(dirname "$0")"
VERSION="${1:-0.1.17}"
report="$(mktemp)"
python3 -m pip install --dry-run --ignore-installed --quiet --report "$report" --only-binary=:all: \
  --python-version 3.12 --implementation cp --abi cp312 --target "$(mktemp -d)" \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  "vllm-router==$VERSION"
python3 - "$report" "$VERSION" <<'PY'
import json, sys
report, version = json.load(open(sys.argv[1])), sys.argv[2]
head = open("requirements.txt").read().split("\n")
comments = [line for line in head if line.startswith("#")]
rows = []
for item in sorted(report["install"], key=lambda i: i["metadata"]["name"].lower()):
    meta, sha = item["metadata"], item["download_info"]["archive_info"]["hashes"]["sha256"]
    rows.append(f"{meta['name']}=={meta['version']} \\\n    --hash=sha256:{sha}")
open("requirements.txt", "w").write("\n".join(comments + rows) + "\n")
PY
rm -f "$report"
