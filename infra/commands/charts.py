"""`infra charts pull [--check]`: the pinned Helm chart archives in charts/, checked.

Downloads each chart pinned in infra/catalog/versions.py (PINNED_CHARTS) that is not in the
directory yet — from its HTTP repository or OCI registry — and checks every archive there: the
chart and version inside, and its sha256 against the digest recorded in
infra/catalog/chart_digests.json. A pin with no digest recorded yet gets its archive's digest
recorded there (commit it after checking it against the repository's index.yaml). `--check`
downloads and records nothing: it exits 1 when an archive is missing, differs, or has no digest
recorded. `infra plan` templates the releases whose archives are there, and with
INFRA_CHART_DIR set `pulumi up` installs them from it (docs/charts.md). Needs helm-python-sdk
(`pip install '.[charts]'`) and, to download, network.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from infra.errors import Problem, UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "charts", help="Helm chart archives: `infra charts pull` downloads and checks the pinned ones",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="charts_command", metavar="ACTION")
    sub.required = True
    pull = sub.add_parser("pull", help="download the pinned chart archives into charts/ and check them")
    pull.add_argument("--check", action="store_true",
                      help="download and record nothing; exit 1 when an archive is missing, differs or has no digest recorded")
    pull.add_argument("--dest", type=Path, default=None, help="directory of the archives (default: the project's charts/)")
    pull.add_argument("--root", type=Path, default=None, help="project root (default: the project around the current directory)")
    pull.set_defaults(func=run_pull)


def run_pull(args: argparse.Namespace, pins=None, digests: Path | None = None) -> int:
    """`digests`: the file of recorded digests (default infra/catalog/chart_digests.json)."""
    from infra.catalog.versions import PINNED_CHARTS
    from infra.charts.digests import record_digest, recorded_digest
    from infra.charts.pull import check_archive, pull_chart
    from infra.charts.source import archive_name
    from infra.charts.template import ChartError, file_digest, helm_available
    from infra.project import project_root

    if not helm_available():
        raise UserError([Problem("infra charts pull", "needs helm-python-sdk: pip install '.[charts]'")])
    dest = args.dest or project_root(args.root) / "charts"
    failed = 0
    for chart, version, repo in pins if pins is not None else PINNED_CHARTS:
        digest = recorded_digest(chart, version, digests) or ""
        path = dest / archive_name(chart, version)
        try:
            if not path.is_file():
                if args.check:
                    print(f"MISSING {path}")
                    failed += 1
                    continue
                pull_chart(chart, version, repo, dest)
                print(f"pulled  {path}")
            problems = check_archive(path, chart, version, digest)
        except ChartError as err:
            print(f"FAILED  {chart} {version}: {err}")
            failed += 1
            continue
        if not digest and args.check:
            problems.append(f"{path.name}: no digest recorded for {chart} {version} (`infra charts pull` records it)")
        for problem in problems:
            print(f"FAILED  {problem}")
        failed += bool(problems)
        if problems:
            continue
        print(f"ok      {path.name} {file_digest(path)}")
        if not digest:
            written = record_digest(chart, version, file_digest(path), digests)
            print(f"        recorded in {written.name}: check it against the repository's index.yaml, then commit it")
    return 1 if failed else 0
