#!/usr/bin/env bash
# The Pulumi CLI and the resource plugins the Go module proxy serves, built once per version into
# ${INFRA_TOOLS_CACHE:-~/.cache/inference-platform-tools} (issue 38; pins and what cannot be built:
# scripts/pulumi_toolchain.py, docs/testing.md). Needs Go and the proxy, no other network.
#   scripts/build_pulumi.sh [--rebuild]   builds what is missing, prints one bin dir per binary
#   eval "$(python3 scripts/pulumi_toolchain.py env)"   puts them on PATH
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/pulumi_toolchain.py build "$@"
