#!/usr/bin/env bash
# network-config-analyzer 2.1.0 from PyPI in a venv of its own (it pins PyYAML, lxml, networkx and
# more exactly; the project's venv must not take those pins):
#   scripts/install_nca.sh [DIR]   (default .venv-nca) — prints DIR/bin/nca
# The policy tests (tests/policy_analyzer.py) use $NCA, else build the same venv under ~/.cache.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-.venv-nca}"
version="2.1.0"
if [ ! -x "$dir/bin/nca" ] || ! "$dir/bin/python" -m pip show network-config-analyzer 2>/dev/null | grep -qx "Version: $version"; then
  python3 -m venv "$dir"
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "network-config-analyzer==$version"
fi
echo "$dir/bin/nca"
