#!/usr/bin/env bash
# One entry point for a fresh clone: creates .venv (Python >= 3.11), installs the project, runs it.
#   ./dev.sh plan [STACK] [infra plan options]   offline plan (default stack: prod)
#   ./dev.sh test [pytest options]                the whole test suite
#   ./dev.sh infra ARGS...                        any `infra` command (layout, diff, doctor, ...)
set -euo pipefail
cd "$(dirname "$0")"

pick_python() {
  for candidate in "${PYTHON:-}" python3.11 python3.12 python3.13 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  echo "dev.sh: Python 3.11 or newer is required (set PYTHON=/path/to/python3.11)" >&2
  return 1
}

ensure_venv() {  # $1: extras ("" or "test")
  local extras="$1" spec="." stamp
  [ -n "$extras" ] && spec=".[${extras}]"
  if [ ! -x .venv/bin/python ]; then
    "$(pick_python)" -m venv .venv
  fi
  stamp=".venv/.installed-${extras:-base}-$(cat pyproject.toml | cksum | cut -d' ' -f1)"
  if [ ! -f "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null
    .venv/bin/python -m pip install --quiet -e "$spec"
    touch "$stamp"
  fi
}

cmd="${1:-}"; shift || true
case "$cmd" in
  plan)
    ensure_venv ""
    stack="${1:-prod}"; shift || true
    exec .venv/bin/infra plan "$stack" "$@"
    ;;
  test)
    ensure_venv "test"
    exec .venv/bin/python -m pytest "$@"
    ;;
  infra)
    ensure_venv ""
    exec .venv/bin/infra "$@"
    ;;
  *)
    sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
