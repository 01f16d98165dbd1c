#!/usr/bin/env bash
# checkov 3.3.30 from PyPI in a venv of its own (its pinned libraries clash with the project's):
#   scripts/install_checkov.sh [DIR]   (default .venv-checkov) — prints DIR/bin/checkov
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-.venv-checkov}"
version="3.3.30"
if [ ! -x "$dir/bin/checkov" ] || [ "$("$dir/bin/checkov" --version 2>/dev/null)" != "$version" ]; then
  python3 -m venv "$dir"
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "checkov==$version"
fi
echo "$dir/bin/checkov"
