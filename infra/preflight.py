"""Pre-flight checks against the DigitalOcean API, run before `pulumi up` (`infra doctor`).

A `pulumi up` that fails forty minutes in because the account's Droplet limit is too low, the GPU
size is not offered in the region or the Kubernetes minor version was retired is an expensive way to
learn something one API call could have said. `run_checks` asks those questions up front and
returns one `Check` per question with a concrete fix; it never raises for API or network trouble —
each failure becomes a failing check with a message a person can act on.

The core is pure: it takes a `DoctorTarget` (what the stack plans to build) and any object with
pydo's `account.get()`, `sizes.list()`, `regions.list()` and `kubernetes.list_options()`, so the
command, the tests and other callers share it. DigitalOcean tool conventions apply: the token comes
from `DIGITALOCEAN_TOKEN` (or `DIGITALOCEAN_ACCESS_TOKEN`), the API base URL from
`DIGITALOCEAN_API_URL`. Without either variable the token is read the way `pulumi up` will read it:
the stack's `digitalocean:token` secret, decrypted by the Pulumi CLI (`token_from_pulumi_config`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar
from urllib.parse import urlparse

from pydantic import BaseModel

from infra.catalog.gpus import gpu_size
from infra.do_answers import (
    PAGES,
    AccountAnswer,
    AccountLimits,
    AccountStatus,
    DoksVersion,
    KubernetesOptions,
    KubernetesOptionsAnswer,
    Region,
    Size,
)
from infra.json_shapes import ShapeError, validate

Status = Literal["pass", "warn", "fail"]

DEFAULT_API_URL = "https://api.digitalocean.com"
TOKEN_ENV_VARS = ("DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN")
API_URL_ENV_VAR = "DIGITALOCEAN_API_URL"

# DO Network File Storage shares start at 50 GiB (docs.digitalocean.com/products/nfs).
NFS_MIN_SIZE_GIB = 50
# /v2/sizes and /v2/regions are paginated; 200 is the API's maximum page size.
_PAGE_SIZE = 200
_TOKEN_PAGE = "https://cloud.digitalocean.com/account/api/tokens"


@dataclass(frozen=True)
class PoolTarget:
    """One node pool the stack will create: its name, Droplet size and largest node count."""

    name: str
    size_slug: str
    max_nodes: int


@dataclass(frozen=True)
class DoctorTarget:
    """What a stack plans to build, reduced to what the DigitalOcean API can confirm.

    `pools` includes the system pool; `planned_max_nodes` is the most Droplets the stack can run at
    once (every pool at its autoscaling maximum), which must fit in the account's Droplet limit.
    """

    region: str
    kubernetes_version_prefix: str
    pools: list[PoolTarget] = field(default_factory=list)
    nfs_size_gib: int | None = None
    planned_max_nodes: int = 0


@dataclass(frozen=True)
class Check:
    """One pre-flight answer: pass, warn (deploy may work, look first) or fail (deploy will not work)."""

    name: str
    status: Status
    detail: str
    fix: str = ""


class ApiFailure(Exception):
    """An API call that did not produce an answer, already phrased for a person.

    `fatal` failures (bad token, no network) make every further API call pointless.
    """

    def __init__(self, message: str, fix: str, *, fatal: bool):
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.fatal = fatal


# ---------------------------------------------------------------------------------------------
# Environment and client


def token_from_env(env: Mapping[str, str]) -> str | None:
    """The DO API token, by the same variables doctl and the Terraform/Pulumi providers read."""
    for name in TOKEN_ENV_VARS:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


PULUMI_TOKEN_KEY = "digitalocean:token"


@dataclass(frozen=True)
class TokenLookup:
    """Where the token came from, or why none was found (never the token itself in `detail`).

    `fix` overrides the generic "create a token" advice when a token was found but is unusable.
    """

    token: str | None
    detail: str
    fix: str = ""


def token_problem(token: str) -> str | None:
    """Why `token` cannot be a DigitalOcean API token, or None. Never includes the token.

    DO tokens are printable ASCII without spaces (`dop_v1_` + 64 hex digits). A token copied with a
    line break, a tab or a zero-width space would otherwise reach the HTTP layer, whose error
    message quotes the whole Authorization header.
    """
    for index, char in enumerate(token, start=1):
        code = ord(char)
        if 33 <= code <= 126:
            continue
        if char in "\r\n":
            what = "a line break"
        elif char == "\t":
            what = "a tab"
        elif char == " ":
            what = "a space"
        elif char.isspace():
            what = f"a whitespace character (U+{code:04X})"
        elif code < 32 or code == 127:
            what = f"a control character (U+{code:04X})"
        else:
            what = f"a non-ASCII character (U+{code:04X})"
        return (
            f"contains {what} at character {index} of {len(token)}; "
            "a DigitalOcean token is printable ASCII without spaces"
        )
    return None


_BAD_TOKEN_FIX = (
    "copy the token again without spaces, line breaks or invisible characters "
    f"(tokens: {_TOKEN_PAGE})"
)


def token_from_pulumi_config(
    stack: str,
    root: Any,
    stack_has_token: bool,
    *,
    which: Callable[[str], str | None] = shutil.which,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> TokenLookup:
    """The stack's `digitalocean:token` secret as the Pulumi CLI decrypts it for `pulumi up`.

    Only asked when the stack file declares the key (a CLI round trip costs seconds and may need a
    login or passphrase). The CLI's error is passed on, first line only: it says what to do
    (`pulumi login`, PULUMI_CONFIG_PASSPHRASE) and never contains the secret.
    """
    where = f"the stack's Pulumi config ({PULUMI_TOKEN_KEY})"
    if not stack_has_token:
        return TokenLookup(None, f"{PULUMI_TOKEN_KEY} is not set in stacks/Pulumi.{stack}.yaml")
    pulumi = which("pulumi")
    if pulumi is None:
        return TokenLookup(None, f"{where} needs the pulumi CLI to decrypt it, and it is not on PATH")
    env = dict(os.environ, PULUMI_SKIP_UPDATE_CHECK="true")
    try:
        done = run(
            [pulumi, "config", "get", PULUMI_TOKEN_KEY, "--stack", stack, "--cwd", str(root)],
            capture_output=True, text=True, timeout=120, env=env, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return TokenLookup(None, f"`pulumi config get {PULUMI_TOKEN_KEY}` did not run: {type(err).__name__}")
    if done.returncode != 0:
        reason = next((ln.strip() for ln in done.stderr.splitlines() if ln.strip()), f"exit {done.returncode}")
        return TokenLookup(None, f"`pulumi config get {PULUMI_TOKEN_KEY} --stack {stack}` failed: {reason}")
    token = done.stdout.strip()
    if not token:
        return TokenLookup(None, f"{where} is empty")
    problem = token_problem(token)
    if problem:
        return TokenLookup(None, f"the token in {where} {problem}", _BAD_TOKEN_FIX)
    return TokenLookup(token, f"token from {where}")


def find_token(
    env: Mapping[str, str],
    stack: str,
    root: Any,
    stack_has_token: bool,
    **pulumi_kwargs: Any,
) -> TokenLookup:
    """The token by the DO tools' variables first, then the stack's Pulumi config."""
    token = token_from_env(env)
    if token:
        source = next(name for name in TOKEN_ENV_VARS if env.get(name, "").strip())
        problem = token_problem(token)
        if problem:
            return TokenLookup(None, f"the token in {source} {problem}", _BAD_TOKEN_FIX)
        return TokenLookup(token, f"token from {source}")
    found = token_from_pulumi_config(stack, root, stack_has_token, **pulumi_kwargs)
    if found.token or found.fix:
        return found
    return TokenLookup(None, f"no token in {' or '.join(TOKEN_ENV_VARS)}; {found.detail}")


def api_url_from_env(env: Mapping[str, str]) -> str:
    return env.get(API_URL_ENV_VAR, "").strip().rstrip("/") or DEFAULT_API_URL


def api_url_problem(url: str) -> str | None:
    """Why `url` cannot be the API base URL, or None (never echoes credentials in it)."""
    try:
        parsed = urlparse(url)
        parsed.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError:
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
        return "is not an http(s) URL with a host (e.g. https://api.digitalocean.com); unset it to use the default"
    if any(not 33 <= ord(c) <= 126 for c in url):
        return "contains spaces, control or non-ASCII characters; unset it to use the default"
    if parsed.path.rstrip("/") or parsed.query or parsed.fragment:
        # The client adds /v2/...: `https://api.digitalocean.com/v2` would ask for /v2/v2/account (404).
        return (
            f"has a path ({parsed.path or '?' + parsed.query}); give the API's base URL only, e.g. "
            "https://api.digitalocean.com (the client adds /v2/...)"
        )
    return None


# ---------------------------------------------------------------------------------------------
# Redaction: nothing doctor prints may carry a credential, whatever the API or the HTTP layer says.

REDACTED = "[redacted]"
# `Authorization: Bearer <token>` as an HTTP library or an echoing server quotes it.
_BEARER = re.compile(r"(?i)\b(bearer)(\s+|\s*[:=]\s*)(?!\[redacted\])[^\s'\",;)\]}]{8,}")
# DigitalOcean token formats: dop_v1_ (personal), doo_v1_ (OAuth), dor_v1_ (refresh), ..., and
# their 64-hex-digit body on its own (a server may quote the token without its prefix).
_DO_TOKEN = re.compile(r"\bdo[a-z]_v1_[A-Za-z0-9_\-]*|\b[0-9a-fA-F]{64}\b")
# `scheme://user:password@host` → `scheme://[redacted]@host`.
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/@\s'\"]+@")


def redact(text: str, secrets: Sequence[str | None] = ()) -> str:
    """`text` with every secret, bearer credential, DO-token-looking string and URL userinfo masked.

    A secret is masked as given, in its escaped form (`repr` turns a line break into `\\n`) and
    piecewise around any whitespace, since error messages quote header values either way.
    """
    variants: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        variants |= {secret, repr(secret)[1:-1], secret.encode("unicode_escape").decode("ascii")}
        variants |= {piece for piece in re.split(r"[\s\x00-\x1f\x7f]+", secret) if len(piece) >= 6}
    for variant in sorted((v for v in variants if v), key=len, reverse=True):
        text = text.replace(variant, REDACTED)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _DO_TOKEN.sub(REDACTED, text)
    return _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)


# Bounds on one API call. pydo's own `timeout=` is the retry policy's total and never reaches the
# socket: azure-core's RequestsTransport waits 300 s to connect and 300 s per read unless told
# `connection_timeout` / `read_timeout` (azure/core/configuration.py ConnectionConfiguration), so an
# API that accepts the connection and never answers held `infra doctor` for five minutes.
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_ENV_VAR = "INFRA_DOCTOR_CONNECT_TIMEOUT"
READ_TIMEOUT_ENV_VAR = "INFRA_DOCTOR_READ_TIMEOUT"
MAX_TIMEOUT_S = 600.0


def timeout_from_env(env: Mapping[str, str], name: str, default: float) -> float:
    """A timeout in seconds from `name` in `env` (default when unset); ValueError naming the variable
    when it is not a number in (0, MAX_TIMEOUT_S]."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 < value <= MAX_TIMEOUT_S):  # also refuses nan and inf
        raise ValueError(f"{name}={text!r} must be a number of seconds greater than 0 and at most {MAX_TIMEOUT_S:g}")
    return value


def make_client(
    token: str,
    api_url: str = DEFAULT_API_URL,
    *,
    retries: int = 0,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    read_timeout_s: float = READ_TIMEOUT_S,
):
    """A pydo client for `api_url` whose every call gives up after `connect_timeout_s` to connect and
    `read_timeout_s` without an answer byte.

    azure-core's bearer-token policy refuses plain http, which is what a local test server or a
    debugging proxy speaks; for http URLs the Authorization header is set directly instead.
    Retries default to none: a pre-flight check should report a 429 or 5xx now, not wait minutes.
    """
    import pydo
    from azure.core.pipeline.policies import HeadersPolicy

    kwargs: dict[str, Any] = {
        "endpoint": api_url,
        "retry_total": retries,
        "connection_timeout": connect_timeout_s,
        "read_timeout": read_timeout_s,
    }
    if urlparse(api_url).scheme == "http":
        kwargs["authentication_policy"] = HeadersPolicy({"Authorization": f"Bearer {token}"})
    return pydo.Client(token, **kwargs)


# ---------------------------------------------------------------------------------------------
# Error translation


class MalformedAnswer(Exception):
    """The API answered 2xx, but not with the shape its reference documents."""


_MALFORMED_FIX = (
    f"retry shortly; if it persists, check that {API_URL_ENV_VAR} (if set) points at the DigitalOcean API"
)


def describe_api_error(err: Exception, what: str, path: str = "") -> ApiFailure:
    """Turn an exception from an API call into a sentence and a fix; never raises.

    The text is not yet redacted: `run_checks` masks credentials in every detail it returns.
    """
    from azure.core.exceptions import (
        HttpResponseError,
        ServiceRequestError,
        ServiceResponseError,
        ServiceResponseTimeoutError,
    )

    endpoint = f"GET {path}" if path else what
    if isinstance(err, MalformedAnswer | json.JSONDecodeError):
        reason = f"not JSON ({_first_line(err)})" if isinstance(err, json.JSONDecodeError) else str(err)
        return ApiFailure(f"unexpected answer from {endpoint}: {reason}", _MALFORMED_FIX, fatal=False)
    if not isinstance(err, HttpResponseError | ServiceRequestError | ServiceResponseError):
        # The request could not be built or sent (a header or URL the HTTP stack refuses, ...):
        # every further call would fail the same way.
        return ApiFailure(
            f"the request for {what} failed before the API answered: {type(err).__name__}: {_first_line(err)}",
            f"check the token and {API_URL_ENV_VAR} (if set) for stray characters",
            fatal=True,
        )
    if isinstance(err, ServiceResponseTimeoutError):
        return ApiFailure(
            f"the DigitalOcean API accepted the connection but sent no answer in time while reading {what}: {_first_line(err)}",
            f"retry shortly (https://status.digitalocean.com); check proxies and {API_URL_ENV_VAR}; "
            f"a slow link may need a longer --read-timeout",
            fatal=True,
        )
    if isinstance(err, ServiceRequestError | ServiceResponseError):
        return ApiFailure(
            f"cannot reach the DigitalOcean API while reading {what}: {_first_line(err)}",
            f"check network access and proxy settings; unset {API_URL_ENV_VAR} unless you mean to override it",
            fatal=True,
        )
    # What is left is an HTTP error answer.
    status = getattr(err, "status_code", None) or getattr(getattr(err, "response", None), "status_code", None)
    api_message = _api_message(err)
    if status == 401:
        return ApiFailure(
            f"the API rejected the token (401 Unauthorized{api_message})",
            f"create a token at {_TOKEN_PAGE} and export DIGITALOCEAN_TOKEN",
            fatal=True,
        )
    if status == 403:
        return ApiFailure(
            f"the token may not read {what} (403 Forbidden{api_message})",
            "give the token read scope on account, sizes, regions and kubernetes",
            fatal=True,
        )
    if status == 429:
        wait = _retry_after_s(err)
        when = f"retry in {wait} s" if wait is not None else "wait a minute and retry"
        return ApiFailure(
            f"rate limited by the API while reading {what} (429 Too Many Requests)",
            f"{when}; another tool or CI job may be using the same token",
            fatal=False,
        )
    if status is not None and status >= 500:
        return ApiFailure(
            f"the DigitalOcean API failed while reading {what} ({status}{api_message})",
            "retry shortly; check https://status.digitalocean.com",
            fatal=False,
        )
    if status == 404:
        return ApiFailure(
            f"{endpoint} does not exist at this API (404 Not Found{api_message})",
            f"check {API_URL_ENV_VAR} (if set): it must be the API's base URL, e.g. {DEFAULT_API_URL}",
            fatal=False,
        )
    return ApiFailure(
        f"unexpected API answer while reading {what} ({status}{api_message})",
        "re-run with a fresh token; report it if it persists",
        fatal=False,
    )


_MAX_DETAIL = 200


def _clip(text: str) -> str:
    """First line, at most `_MAX_DETAIL` characters: a table cell, not a dump of a server's page."""
    lines = text.strip().splitlines()
    line = lines[0].strip() if lines else ""
    return line if len(line) <= _MAX_DETAIL else line[: _MAX_DETAIL - 1] + "…"


def _first_line(err: Exception) -> str:
    return _clip(str(err)) or type(err).__name__


def _api_message(err: Any) -> str:
    """DO error bodies are `{"id": "...", "message": "..."}`."""
    try:
        body = err.response.json()
    except Exception:  # non-JSON body: nothing more to say
        return ""
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str):
        return ""
    message = _clip(message)
    return f": {message}" if message else ""


def _retry_after_s(err: Any) -> int | None:
    headers = getattr(getattr(err, "response", None), "headers", {}) or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
    if seconds is None or not 0 <= seconds < 86400:  # NaN, inf and nonsense are not a wait
        return None
    return int(seconds)


# ---------------------------------------------------------------------------------------------
# Checks


def run_checks(
    target: DoctorTarget,
    client: Any | None,
    *,
    which: Callable[[str], str | None] = shutil.which,
    missing_token: str = "",
    missing_fix: str = "",
    secrets: Sequence[str | None] = (),
    progress: Callable[[str], None] = lambda what: None,
) -> list[Check]:
    """Every pre-flight check for `target`, in the order a person would fix them.

    `client=None` means no usable token was found (`missing_token` says where it was looked for,
    `missing_fix` what to do if not the generic advice): the API checks collapse into one failing
    check. Local tool checks use `which` (injectable for tests). Every detail and fix is passed
    through `redact` with `secrets` (the token), so no credential reaches the terminal.
    `progress(what)` is told before each API call (the command shows it on a terminal).
    """
    checks: list[Check] = []
    if client is None:
        checks.append(
            Check(
                "api token",
                "fail",
                missing_token or f"no token in {' or '.join(TOKEN_ENV_VARS)}",
                missing_fix
                or f"create a read-scoped token at {_TOKEN_PAGE} and export DIGITALOCEAN_TOKEN "
                f"(or `pulumi config set --secret {PULUMI_TOKEN_KEY} ...`)",
            )
        )
    else:
        checks += _api_checks(target, client, progress)
    checks.append(check_nfs_size(target.nfs_size_gib))
    checks.append(check_pinned_versions(target.kubernetes_version_prefix))
    checks += check_local_tools(which)
    return [Check(c.name, c.status, redact(c.detail, secrets), redact(c.fix, secrets)) for c in checks]


def _api_checks(target: DoctorTarget, client: Any, progress: Callable[[str], None]) -> list[Check]:
    checks: list[Check] = []

    progress("the account (GET /v2/account)")
    try:
        account = parse_answer(AccountAnswer, client.account.get()).account
    except Exception as err:  # noqa: BLE001 - every failure becomes a failing check
        failure = describe_api_error(err, "the account", "/v2/account")
        checks.append(Check("api token", "fail", failure.message, failure.fix))
        if failure.fatal:
            return checks
        account = None

    if account is not None:
        checks += _guarded("api token", "/v2/account", lambda: [check_account(account)])
        checks += _guarded(
            "droplet limit", "/v2/account", lambda: [check_droplet_limit(account, target.planned_max_nodes)]
        )

    for name, path, fetch, check in (
        (
            "region",
            "/v2/regions",
            lambda: _all_pages(client.regions.list, "regions", "/v2/regions"),
            lambda data: [check_region(data, target.region)],
        ),
        (
            "node sizes",
            "/v2/sizes",
            lambda: _all_pages(client.sizes.list, "sizes", "/v2/sizes", raw=True),
            lambda data: [*check_pool_sizes(data, target), check_catalog_drift(data)],
        ),
        (
            "kubernetes options",
            "/v2/kubernetes/options",
            lambda: parse_answer(KubernetesOptionsAnswer, client.kubernetes.list_options()).options,
            lambda data: check_kubernetes_options(data, target),
        ),
    ):
        progress(f"{name} (GET {path})")
        try:
            data = fetch()
        except Exception as err:  # noqa: BLE001 - every failure becomes a failing check
            failure = describe_api_error(err, name, path)
            checks.append(Check(name, "fail", failure.message, failure.fix))
            if failure.fatal:
                return checks
            continue
        checks += _guarded(name, path, lambda check=check, data=data: check(data))
    return checks


def _guarded(name: str, path: str, make: Callable[[], list[Check]]) -> list[Check]:
    """Run a check on a validated answer; a part of it that is not the shape the check reads
    (a check's own model, e.g. AccountLimits) is a failing check naming the field, not a traceback."""
    try:
        return make()
    except MalformedAnswer as err:
        return [Check(name, "fail", f"unexpected answer from GET {path}: {err}", _MALFORMED_FIX)]


M = TypeVar("M", bound=BaseModel)


def parse_answer(model: type[M], data: Any, *, prefix: str = "") -> M:
    """`data` as `model`, or MalformedAnswer naming the first field that is not what DO documents
    (its kind only, never its value)."""
    try:
        return validate(model, data, prefix=prefix)
    except ShapeError as err:
        where, what = err.problems[0]
        raise MalformedAnswer(f"`{where}` {what}" if where else f"the body {what}") from None


_MAX_PAGES = 100  # 20,000 entries: far more than any DO list endpoint returns


def _all_pages(list_fn: Callable[..., Any], key: str, path: str = "", *, raw: bool = False) -> list[Any]:
    """Collect every page of a paginated DO list endpoint (`meta.total` says how many exist):
    the items as validated models, or with `raw` as the API's dicts (every field kept, for
    `infra catalog sync`), each page still checked against its model."""
    page_model = PAGES[key]
    items: list[Any] = []
    for page in range(1, _MAX_PAGES + 1):
        answer = list_fn(per_page=_PAGE_SIZE, page=page)
        body = parse_answer(page_model, answer)
        batch = getattr(body, key) or []
        items += list(answer[key] or []) if raw else batch
        total = body.meta.total if body.meta else None
        if not batch or total is None or len(items) >= total:
            return items
    raise MalformedAnswer(f"`meta.total` still not reached after {_MAX_PAGES} pages")


def check_account(account: Mapping[str, Any] | AccountStatus) -> Check:
    answer = parse_answer(AccountStatus, account, prefix="account")
    status = answer.status or "unknown"
    email = answer.email or "the account"
    if status == "active":
        return Check("api token", "pass", f"token valid for {email} (status active)")
    reason = answer.status_message or ""
    return Check(
        "api token",
        "fail",
        f"token valid but {email} is {status}" + (f": {reason}" if reason else ""),
        "resolve the account status in the DigitalOcean control panel (billing, verification)",
    )


def check_droplet_limit(account: Mapping[str, Any] | AccountLimits, planned_max_nodes: int) -> Check:
    limit = parse_answer(AccountLimits, account, prefix="account").droplet_limit
    if limit is None:
        return Check(
            "droplet limit", "warn", "the API did not report a droplet limit", "ask DigitalOcean support"
        )
    detail = f"limit {limit} Droplets, stack needs up to {planned_max_nodes} nodes"
    if limit >= planned_max_nodes:
        return Check("droplet limit", "pass", detail + " (existing Droplets count against the limit too)")
    return Check(
        "droplet limit",
        "fail",
        detail,
        f"request a limit of at least {planned_max_nodes} in the control panel, or lower the pools' max_nodes",
    )


def check_region(regions: Sequence[Mapping[str, Any] | Region], region: str) -> Check:
    entries = [parse_answer(Region, r, prefix=f"regions[{i}]") for i, r in enumerate(regions)]
    for entry in entries:
        if entry.slug == region:
            if entry.available:
                return Check("region", "pass", f"{region} ({entry.name or region}) is available")
            return Check(
                "region",
                "fail",
                f"{region} exists but does not accept new resources",
                "choose another region in the stack's `region`",
            )
    known = sorted(r.slug for r in entries if r.available and r.slug)
    return Check("region", "fail", f"{region} is not a DigitalOcean region", _one_of("use one of", known))


def _one_of(prefix: str, choices: Sequence[str]) -> str:
    """`use one of: a, b` — or say that the API offered nothing, rather than a bare "use one of:"."""
    if choices:
        return f"{prefix}: " + ", ".join(choices)
    return f"{prefix.rsplit(' one of', 1)[0]}: none offered by the API for this account; ask DigitalOcean support"


def check_pool_sizes(sizes: Sequence[Mapping[str, Any] | Size], target: DoctorTarget) -> list[Check]:
    """Each pool's Droplet size must exist, be available and be offered in the region.

    Contract-only GPU sizes never appear in /v2/sizes, so their absence is a warning: only the
    account team can confirm they are allocated to this account in this region.
    """
    by_slug = {s.slug: s for s in (parse_answer(Size, s, prefix=f"sizes[{i}]") for i, s in enumerate(sizes))}
    checks = []
    for pool in target.pools:
        name = f"pool {pool.name} size"
        size = by_slug.get(pool.size_slug)
        catalog = gpu_size(pool.size_slug)
        if size is None:
            if catalog is not None and catalog.contract_only:
                checks.append(
                    Check(
                        name,
                        "warn",
                        f"{pool.size_slug} is contract-only and not listed by /v2/sizes",
                        f"confirm with your DigitalOcean account team that it is allocated in {target.region}",
                    )
                )
            else:
                checks.append(
                    Check(
                        name,
                        "fail",
                        f"{pool.size_slug} is not a size this account can create",
                        "check the slug (`doctl compute size list`) in the stack's pool `size`",
                    )
                )
            continue
        regions = size.regions or []
        if not size.available:
            checks.append(
                Check(
                    name, "fail", f"{pool.size_slug} is not available for new Droplets", "choose another size"
                )
            )
        elif target.region not in regions:
            offered = ", ".join(sorted(regions)) or "no region"
            checks.append(
                Check(
                    name,
                    "fail",
                    f"{pool.size_slug} is not offered in {target.region} (offered in: {offered})",
                    "move the stack to one of those regions or choose another size",
                )
            )
        else:
            checks.append(Check(name, "pass", _size_detail(size, target.region)))
    return checks


def check_catalog_drift(sizes: Sequence[Mapping[str, Any]], catalog: Mapping[str, Any] | None = None) -> Check:
    """The catalog's GPU sizes and prices (infra/catalog/gpu_sizes.json, or `catalog`) against this
    /v2/sizes answer: plan costs and layouts use the catalog, so a price or size that moved is a
    warning with the command that takes the answer in."""
    from infra.catalog.gpus import catalog_path
    from infra.catalog_sync import catalog_drift, describe_drift, is_gpu_size, read_catalog

    doc = catalog if catalog is not None else read_catalog(catalog_path())
    drift = catalog_drift(doc, sizes)
    listed = sum(1 for size in sizes if is_gpu_size(size))
    if drift.any:
        return Check(
            "catalog prices",
            "warn",
            f"the GPU catalog differs from /v2/sizes: {describe_drift(drift)}",
            "run `infra catalog sync` to take this answer's prices, regions and sizes into "
            "infra/catalog/gpu_sizes.json, then review and commit the diff",
        )
    detail = f"catalog prices match /v2/sizes ({listed} GPU sizes listed)"
    if drift.regions:
        detail += f"; {describe_drift(drift)}"
    return Check("catalog prices", "pass", detail)


def _size_detail(size: Size, region: str) -> str:
    detail = f"{size.slug} offered in {region}"
    gpu = size.gpu_info
    if gpu is not None and gpu.count:
        detail += f", {gpu.count}x {gpu.model or 'GPU'}"
    if size.price_hourly:
        detail += f", ${size.price_hourly:g}/h"
    return detail


def check_kubernetes_options(options: Mapping[str, Any] | KubernetesOptions, target: DoctorTarget) -> list[Check]:
    answer = parse_answer(KubernetesOptions, options, prefix="options")
    checks = []
    doks_regions = {r.slug for r in answer.regions or []}
    if target.region in doks_regions:
        checks.append(Check("kubernetes region", "pass", f"DOKS is offered in {target.region}"))
    else:
        checks.append(
            Check(
                "kubernetes region",
                "fail",
                f"DOKS is not offered in {target.region}",
                _one_of("choose one of", sorted(s for s in doks_regions if s)),
            )
        )

    prefix = target.kubernetes_version_prefix.rstrip(".")
    offered_versions = answer.versions or []
    versions = [v for v in offered_versions if _version_matches(v, prefix)]
    offered = sorted({_minor(v) for v in offered_versions if _minor(v)})
    if versions:
        newest = max(versions, key=_version_key).slug or "?"
        checks.append(Check("kubernetes version", "pass", f"{prefix} is offered (newest patch {newest})"))
    else:
        checks.append(
            Check(
                "kubernetes version",
                "fail",
                f"no DOKS version matches {prefix!r}",
                _one_of("set cluster.version to one of", offered),
            )
        )
    return checks


def _version_matches(version: DoksVersion, prefix: str) -> bool:
    kube = version.kubernetes_version or version.slug or ""
    slug = version.slug or ""
    return (
        kube == prefix
        or kube.startswith(prefix + ".")
        or slug.startswith(prefix + ".")
        or slug == prefix  # cluster.version may be an exact DOKS slug
    )


def _version_key(version: DoksVersion) -> tuple[int, ...]:
    """`1.33.1-do.5` → (1, 33, 1, 5): order by Kubernetes patch, then DOKS revision."""
    return tuple(int(n) for n in re.findall(r"\d+", version.slug or ""))


def _minor(version: DoksVersion) -> str:
    parts = (version.kubernetes_version or "").split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else ""


def check_nfs_size(nfs_size_gib: int | None) -> Check:
    if nfs_size_gib is None:
        return Check("nfs share size", "pass", "no NFS weight cache in this stack")
    if nfs_size_gib >= NFS_MIN_SIZE_GIB:
        return Check(
            "nfs share size",
            "pass",
            f"{nfs_size_gib} GiB (minimum {NFS_MIN_SIZE_GIB} GiB; shares never shrink)",
        )
    return Check(
        "nfs share size",
        "fail",
        f"{nfs_size_gib} GiB is below the {NFS_MIN_SIZE_GIB} GiB minimum of DO Network File Storage",
        f"set model_cache.size_gib to at least {NFS_MIN_SIZE_GIB} (and above the models' weight size)",
    )


def check_pinned_versions(version: str) -> Check:
    """Every pinned chart and image must support the cluster's Kubernetes minor (offline: the
    ranges and their sources are in infra/catalog/support_matrix.yaml)."""
    from infra.compat import parse_minor, unsupported_pins

    try:
        major, minor = parse_minor(version)
    except ValueError:
        return Check(
            "pinned versions",
            "warn",
            f"cannot read a Kubernetes minor from cluster.version {version!r}",
            "set cluster.version to a minor (1.33) or an exact DOKS slug (1.33.1-do.5)",
        )
    unsupported = unsupported_pins(f"{major}.{minor}")
    if not unsupported:
        return Check("pinned versions", "pass", f"every pinned chart and image supports Kubernetes {major}.{minor}")
    listed = "; ".join(f"{u.pin} supports {u.supported}" for u in unsupported)
    return Check(
        "pinned versions",
        "warn",
        f"Kubernetes {major}.{minor} is outside the upstream range of: {listed}",
        "pin releases that support it (infra/catalog/versions.py; ranges and sources in "
        "infra/catalog/support_matrix.yaml) or keep cluster.version inside those ranges",
    )


# (check name, executable, status when missing, why it matters, where to get it)
_LOCAL_TOOLS = (
    ("pulumi cli", "pulumi", "fail", "", "https://www.pulumi.com/docs/install/"),
    ("kubectl", "kubectl", "warn", " (optional: needed to inspect the cluster)", "https://kubernetes.io/docs/tasks/tools/"),
)


def check_local_tools(which: Callable[[str], str | None] = shutil.which) -> list[Check]:
    """A real deploy runs the pulumi CLI; kubectl is only needed to look at the cluster afterwards."""
    checks = []
    for check, exe, missing, why, url in _LOCAL_TOOLS:
        path = which(exe)
        if path:
            checks.append(Check(check, "pass", f"found at {path}"))
        else:
            checks.append(Check(check, missing, f"`{exe}` is not on PATH{why}", f"install it: {url}"))
    return checks


def exit_code(checks: Sequence[Check]) -> int:
    """1 when any check failed; warnings alone do not block a deploy."""
    return 1 if any(c.status == "fail" for c in checks) else 0
