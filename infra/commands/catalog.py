"""`infra catalog sync`: rewrite the GPU size catalog from the live `GET /v2/sizes` answer.

Takes every GPU size the API lists into infra/catalog/gpu_sizes.json (or `--catalog FILE`, or
$INFRA_GPU_CATALOG): its price, regions and availability, stamped with today's date (`--as-of`)
and the API it came from; new GPU sizes are added when gpus.py knows their accelerator. Contract
sizes (never listed) and sizes the answer omits are kept. The file is written canonically, so
the diff is the change; `--check` only reports, and exits 1 when a price, region or size differs.

The token comes from DIGITALOCEAN_TOKEN (or DIGITALOCEAN_ACCESS_TOKEN); DIGITALOCEAN_API_URL
overrides the API URL, as for `infra doctor`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
from pathlib import Path
from urllib.parse import urlparse

from infra import preflight
from infra.cli_args import non_negative_int
from infra.commands.files import check_output_file, write_failed
from infra.errors import Problem, UserError


def _date(text: str) -> str:
    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a date YYYY-MM-DD, got {text!r}") from None


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "catalog",
        help="the GPU size catalog: `infra catalog sync` rewrites it from the DigitalOcean API",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="catalog_command", metavar="ACTION")
    sub.required = True
    sync = sub.add_parser("sync", help="take GET /v2/sizes' GPU prices, regions and sizes into the catalog")
    sync.add_argument("--catalog", type=Path, default=None, help="catalog file (default: $INFRA_GPU_CATALOG or the packaged one)")
    sync.add_argument("--as-of", type=_date, default=None, help="date to stamp the values with (default: today, UTC)")
    sync.add_argument("--check", action="store_true", help="do not write; exit 1 when a price, region or size differs from the API")
    sync.add_argument("--retries", type=non_negative_int, default=0, help="retries for 429/5xx answers (default 0)")
    sync.set_defaults(func=run_sync)


def fetch_sizes(client) -> list[dict]:
    """Every page of /v2/sizes, with API trouble turned into a one-line UserError."""
    try:
        return preflight._all_pages(client.sizes.list, "sizes", "/v2/sizes", raw=True)
    except Exception as err:  # noqa: BLE001 - phrased by describe_api_error
        failure = preflight.describe_api_error(err, "the sizes", "/v2/sizes")
        raise UserError([Problem("GET /v2/sizes", f"{failure.message} ({failure.fix})")]) from None


def run_sync(args: argparse.Namespace) -> int:
    from infra.catalog.gpus import catalog_path
    from infra.catalog_sync import dump_catalog, read_catalog, sync_catalog

    path = args.catalog or catalog_path()
    try:
        doc = read_catalog(path)
    except (OSError, ValueError) as err:
        raise UserError([Problem(f"catalog {path}", str(err))]) from None
    if not args.check:
        check_output_file(path, "--catalog")
    env = os.environ
    token = preflight.token_from_env(env)
    if not token:
        raise UserError([Problem("DIGITALOCEAN_TOKEN", "not set; export a read-scoped DigitalOcean API token")])
    problem = preflight.token_problem(token)
    if problem:
        raise UserError([Problem("DIGITALOCEAN_TOKEN", problem)])
    api_url = preflight.api_url_from_env(env)
    problem = preflight.api_url_problem(api_url)
    if problem:
        raise UserError([Problem(preflight.API_URL_ENV_VAR, problem)])
    sizes = fetch_sizes(preflight.make_client(token, api_url, retries=args.retries))

    as_of = args.as_of or dt.datetime.now(dt.UTC).date().isoformat()
    host = urlparse(api_url).hostname or api_url
    result = sync_catalog(
        doc, sizes, as_of=as_of, source_key=f"api-{as_of}", source=f"GET /v2/sizes ({host}) on {as_of}"
    )
    for line in result.summary():
        print(preflight.redact(line, [token]))
    drifted = result.drift.any or result.drift.regions or result.added
    if args.check:
        # Only what the API says counts: re-stamping the same values with a new date is not drift.
        print(f"{path}: {'differs from' if drifted else 'matches'} /v2/sizes" + (" (run `infra catalog sync`)" if drifted else ""))
        return 1 if drifted else 0
    before, after = path.read_text(encoding="utf-8"), dump_catalog(result.doc)
    if before == after:
        print(f"{path}: up to date")
        return 0
    try:
        path.write_text(after, encoding="utf-8")
    except OSError as err:
        raise write_failed(err, "--catalog", path) from None
    print(f"{path}: rewritten from /v2/sizes of {as_of}; review and commit the diff")
    return 0
