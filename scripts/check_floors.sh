#!/usr/bin/env bash
# Prove the dependency floors in pyproject.toml: install the LOWEST version every direct
# dependency allows (uv's `--resolution lowest-direct`) on the oldest Python we claim
# (requires-python), then plan every stack offline and run the Pulumi component tests.
#
#   scripts/check_floors.sh [--keep] [--full] [WORKDIR]
#
#   WORKDIR  where the throw-away venvs go (default: a new mktemp directory, removed at exit
#            unless --keep)
#   --keep   leave WORKDIR in place (to inspect `pip list` after a failure)
#   --full   run the whole test suite on the floors, not only the component tests
#
# Needs: network access to PyPI (uv and the packages come from there) and a Python matching the
# floor of requires-python on PATH (FLOOR_PYTHON overrides: FLOOR_PYTHON=/usr/bin/python3.11).
# Needs no cloud credentials: `infra plan` is offline.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

keep=0 full=0 work=""
for arg in "$@"; do
  case "$arg" in
    --keep) keep=1 ;;
    --full) full=1 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "check_floors: unknown option $arg" >&2; exit 2 ;;
    *) work="$arg" ;;
  esac
done

# The Python floor is read from pyproject.toml, so raising requires-python moves this job with it.
floor=$(sed -n 's/^requires-python *= *">= *\([0-9.]*\)".*/\1/p' pyproject.toml)
[ -n "$floor" ] || { echo "check_floors: no requires-python \">=X.Y\" in pyproject.toml" >&2; exit 2; }
python="${FLOOR_PYTHON:-python$floor}"
if ! command -v "$python" >/dev/null 2>&1; then
  echo "check_floors: $python not found (requires-python >= $floor); set FLOOR_PYTHON" >&2
  exit 2
fi
got=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$got" != "$floor" ]; then
  echo "check_floors: $python is Python $got, not the floor $floor; set FLOOR_PYTHON" >&2
  exit 2
fi

if [ -z "$work" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/check-floors.XXXXXX")
  [ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
start=$(date +%s)
step() { echo "== [$(( $(date +%s) - start ))s] $*"; }

step "Python $("$python" -c 'import platform; print(platform.python_version())') ($python), work dir $work"
# uv itself lives in its own venv so it is not part of what is being tested.
if [ ! -x "$work/tools/bin/uv" ]; then
  "$python" -m venv "$work/tools"
  "$work/tools/bin/python" -m pip install --quiet --disable-pip-version-check uv
fi
uv="$work/tools/bin/uv"
rm -rf "$work/venv"
"$python" -m venv "$work/venv"
venv_python="$work/venv/bin/python"

step "install the lowest allowed version of every direct dependency (uv $("$uv" --version | cut -d' ' -f2))"
# --no-cache: a floor must install from the index, not from a wheel another run left behind.
UV_NO_CACHE=1 "$uv" pip install --quiet --python "$venv_python" --resolution lowest-direct -e ".[test]"
"$uv" pip list --python "$venv_python" | tee "$work/floors-installed.txt" |
  grep -iE '^(pulumi|pulumi-digitalocean|pulumi-kubernetes|pydo|pyyaml|pydantic|ruamel-yaml|kubernetes|pytest) '

status=0
plans="$work/plans"
mkdir -p "$plans"
for stack in dev staging prod; do
  step "infra plan $stack"
  if ! "$work/venv/bin/infra" plan "$stack" --json "$plans/$stack.json" >"$plans/$stack.txt" 2>&1; then
    echo "FAIL: infra plan $stack on the floors:" >&2
    tail -20 "$plans/$stack.txt" >&2
    status=1
  fi
done

cd "$root"
if [ "$full" = 1 ]; then
  tests=(tests)
else
  # `declare` under the mock runtime: the code that calls the Pulumi SDK (generic resources, invokes,
  # outputs), per concern and for whole stacks against the plan's records.
  tests=(tests/stack_resources tests/resource_graph)
fi
for path in "${tests[@]}"; do
  [ -e "$path" ] || { echo "check_floors.sh: $path does not exist (did the tests move?)" >&2; exit 2; }
done
step "pytest ${tests[*]}"
"$venv_python" -m pytest -q -p no:cacheprovider "${tests[@]}" || status=1

step "done: $([ "$status" = 0 ] && echo "floors hold" || echo "a floor is too low (see above)")"
exit "$status"
