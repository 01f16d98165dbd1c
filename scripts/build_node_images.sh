#!/usr/bin/env bash
# Build (or reuse) the stand-in container images the node tests run (tests/node/images.py): pause,
# python, nginx and the CPU vLLM engine, from Debian's packages (debootstrap) and PyPI, as OCI
# archives under ${INFRA_TOOLS_CACHE:-~/.cache/inference-platform-tools}/node-images. Needs root.
#   scripts/build_node_images.sh              # every image
#   scripts/build_node_images.sh pause python # some
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 -m tests.node.images "$@"
