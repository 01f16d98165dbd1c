"""`infra doctor`: pre-flight checks against a local HTTP server speaking the DigitalOcean API.

The payloads follow the shapes of the public API reference (/v2/account, /v2/sizes, /v2/regions,
/v2/kubernetes/options), trimmed to a handful of entries. Every error path a real API produces —
no route, 401, 403, 429, 5xx — is exercised through pydo itself, not a stub client.
"""

from __future__ import annotations

import copy
import os
import socket
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from infra import preflight
from infra.commands import doctor
from infra.errors import ConfigError
from infra.preflight import Check, DoctorTarget, PoolTarget
from tests.conftest import ROOT, make_project, table_rows

TOKEN = "dop_v1_" + "0123456789abcdef" * 4

ACCOUNT = {
    "account": {
        "droplet_limit": 25,
        "floating_ip_limit": 3,
        "volume_limit": 100,
        "email": "platform@example.com",
        "name": "Platform Team",
        "uuid": "b6fr89dbf6d9156cace5f3c78dc9851d957381ef",
        "email_verified": True,
        "status": "active",
        "status_message": "",
        "team": {"uuid": "5df3e3004a17e242b7c20ca6c9fc25b701a47ece", "name": "Inference"},
    }
}


def _size(
    slug, regions, *, price_hourly, vcpus, memory_mb, gpu=None, available=True, description="General Purpose"
):
    size = {
        "slug": slug,
        "memory": memory_mb,
        "vcpus": vcpus,
        "disk": 160,
        "transfer": 5.0,
        "price_monthly": round(price_hourly * 672, 2),
        "price_hourly": price_hourly,
        "regions": regions,
        "available": available,
        "description": description,
        "disk_info": [{"type": "local", "size": {"amount": 160, "unit": "gib"}}],
    }
    if gpu:
        count, model, vram_gib = gpu
        size["gpu_info"] = {"count": count, "model": model, "vram": {"amount": vram_gib, "unit": "gib"}}
        size["disk_info"].append({"type": "scratch", "size": {"amount": 40960, "unit": "gib"}})
    return size


SIZES = [
    _size("s-8vcpu-16gb", ["nyc1", "sfo3", "atl1", "ams3"], price_hourly=0.14286, vcpus=8, memory_mb=16384),
    _size(
        "gpu-mi300x8-1536gb",
        ["atl1"],
        price_hourly=15.92,
        vcpus=160,
        memory_mb=1966080,
        gpu=(8, "amd_mi300x", 1536),
        description="AMD MI300X GPU",
    ),
    _size(
        "gpu-h100x8-640gb",
        ["nyc2", "tor1"],
        price_hourly=23.92,
        vcpus=160,
        memory_mb=1966080,
        gpu=(8, "nvidia_h100", 640),
        description="NVIDIA H100 GPU",
    ),
]

REGIONS = [
    {
        "name": "Atlanta 1",
        "slug": "atl1",
        "features": ["backups", "ipv6", "metadata", "install_agent", "storage", "image_transfer"],
        "available": True,
        "sizes": ["s-8vcpu-16gb", "gpu-mi300x8-1536gb"],
    },
    {
        "name": "New York 2",
        "slug": "nyc2",
        "features": ["backups", "ipv6", "metadata"],
        "available": False,
        "sizes": [],
    },
    {
        "name": "Toronto 1",
        "slug": "tor1",
        "features": ["backups", "ipv6", "metadata", "install_agent", "storage"],
        "available": True,
        "sizes": ["s-8vcpu-16gb", "gpu-h100x8-640gb"],
    },
]

OPTIONS = {
    "options": {
        "regions": [{"name": "Atlanta 1", "slug": "atl1"}, {"name": "Toronto 1", "slug": "tor1"}],
        "versions": [
            {
                "slug": "1.33.1-do.5",
                "kubernetes_version": "1.33.1",
                "supported_features": ["cluster-autoscaler"],
            },
            {
                "slug": "1.32.5-do.2",
                "kubernetes_version": "1.32.5",
                "supported_features": ["cluster-autoscaler"],
            },
        ],
        "sizes": [{"name": "s-8vcpu-16gb", "slug": "s-8vcpu-16gb"}],
    }
}


def _listing(key, items):
    return {key: items, "links": {}, "meta": {"total": len(items)}}


def _target(**overrides) -> DoctorTarget:
    pools = overrides.pop(
        "pools",
        [
            PoolTarget("system", "s-8vcpu-16gb", 3),
            PoolTarget("mi300x", "gpu-mi300x8-1536gb", 4),
            PoolTarget("mi325x", "gpu-mi325x8-2048gb-contracted", 2),
        ],
    )
    fields = dict(
        region="atl1",
        kubernetes_version_prefix="1.33",
        pools=pools,
        nfs_size_gib=1024,
        planned_max_nodes=sum(p.max_nodes for p in pools),
    )
    fields.update(overrides)
    return DoctorTarget(**fields)


def _serve(httpserver, *, account=ACCOUNT, sizes=SIZES, regions=REGIONS, options=OPTIONS):
    httpserver.expect_request("/v2/account").respond_with_json(account)
    httpserver.expect_request("/v2/sizes").respond_with_json(_listing("sizes", sizes))
    httpserver.expect_request("/v2/regions").respond_with_json(_listing("regions", regions))
    httpserver.expect_request("/v2/kubernetes/options").respond_with_json(options)


def _client(httpserver):
    return preflight.make_client(TOKEN, httpserver.url_for("").rstrip("/"))


def _all_tools(name):
    return f"/usr/local/bin/{name}"


def _by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


# ------------------------------------------------------------------------------------ happy path


def test_healthy_account_passes_with_a_warning_for_the_contract_size(httpserver):
    _serve(httpserver)
    checks = preflight.run_checks(_target(), _client(httpserver), which=_all_tools)
    got = _by_name(checks)

    assert got["api token"].status == "pass" and "platform@example.com" in got["api token"].detail
    assert got["droplet limit"].status == "pass" and "needs up to 9" in got["droplet limit"].detail
    assert got["region"].status == "pass"
    assert got["pool system size"].status == "pass"
    assert got["pool mi300x size"].status == "pass" and "8x amd_mi300x" in got["pool mi300x size"].detail
    contract = got["pool mi325x size"]
    assert contract.status == "warn" and "contract-only" in contract.detail and "atl1" in contract.fix
    assert got["kubernetes region"].status == "pass"
    assert got["kubernetes version"].status == "pass" and "1.33.1-do.5" in got["kubernetes version"].detail
    assert got["nfs share size"].status == "pass"
    assert preflight.exit_code(checks) == 0

    # The token travels as a bearer header; list endpoints ask for the largest page.
    requests = [req for req, _ in httpserver.log]
    assert all(req.headers["Authorization"] == f"Bearer {TOKEN}" for req in requests)
    sizes_req = next(r for r in requests if r.path == "/v2/sizes")
    assert sizes_req.args["per_page"] == "200" and sizes_req.args["page"] == "1"


def test_sizes_are_read_across_pages(httpserver):
    first = {"sizes": SIZES[:1], "links": {"pages": {"next": "..."}}, "meta": {"total": len(SIZES)}}
    second = {"sizes": SIZES[1:], "links": {}, "meta": {"total": len(SIZES)}}
    httpserver.expect_request("/v2/account").respond_with_json(ACCOUNT)
    httpserver.expect_request("/v2/sizes", query_string={"per_page": "200", "page": "1"}).respond_with_json(
        first
    )
    httpserver.expect_request("/v2/sizes", query_string={"per_page": "200", "page": "2"}).respond_with_json(
        second
    )
    httpserver.expect_request("/v2/regions").respond_with_json(_listing("regions", REGIONS))
    httpserver.expect_request("/v2/kubernetes/options").respond_with_json(OPTIONS)

    got = _by_name(preflight.run_checks(_target(), _client(httpserver), which=_all_tools))
    assert got["pool mi300x size"].status == "pass"  # only on page 2


# ------------------------------------------------------------------------------------ rules


def test_droplet_limit_below_planned_nodes_fails(httpserver):
    account = copy.deepcopy(ACCOUNT)
    account["account"]["droplet_limit"] = 8
    _serve(httpserver, account=account)
    checks = preflight.run_checks(_target(), _client(httpserver), which=_all_tools)
    limit = _by_name(checks)["droplet limit"]
    assert limit.status == "fail"
    assert "limit 8" in limit.detail and "at least 9" in limit.fix
    assert preflight.exit_code(checks) == 1


def test_droplet_limit_equal_to_planned_nodes_passes():
    assert preflight.check_droplet_limit({"droplet_limit": 9}, 9).status == "pass"
    assert preflight.check_droplet_limit({"droplet_limit": 9}, 10).status == "fail"


def test_inactive_account_fails():
    check = preflight.check_account(
        {"status": "locked", "email": "a@example.com", "status_message": "billing"}
    )
    assert check.status == "fail" and "locked" in check.detail and "billing" in check.detail


def test_size_not_offered_in_region_names_where_it_is(httpserver):
    _serve(httpserver)
    target = _target(pools=[PoolTarget("h100", "gpu-h100x8-640gb", 2)])
    got = _by_name(preflight.run_checks(target, _client(httpserver), which=_all_tools))
    check = got["pool h100 size"]
    assert check.status == "fail"
    assert "not offered in atl1" in check.detail and "nyc2, tor1" in check.detail


def test_unavailable_size_fails():
    sizes = [dict(SIZES[1], available=False)]
    (check,) = preflight.check_pool_sizes(
        sizes, _target(pools=[PoolTarget("mi300x", "gpu-mi300x8-1536gb", 1)])
    )
    assert check.status == "fail" and "not available" in check.detail


def test_unknown_public_slug_fails_but_missing_contract_slug_warns():
    target = _target(
        pools=[
            PoolTarget("typo", "gpu-mi300x8-1536gbb", 1),
            PoolTarget("c", "gpu-mi325x1-256gb-contracted", 1),
        ]
    )
    typo, contract = preflight.check_pool_sizes(SIZES, target)
    assert typo.status == "fail" and "gpu-mi300x8-1536gbb" in typo.detail
    assert contract.status == "warn"


def test_unknown_and_unavailable_regions_fail():
    missing = preflight.check_region(REGIONS, "xyz1")
    assert missing.status == "fail" and "atl1, tor1" in missing.fix  # unavailable nyc2 is not suggested
    closed = preflight.check_region(REGIONS, "nyc2")
    assert closed.status == "fail" and "does not accept" in closed.detail


def test_kubernetes_version_prefix_matches_on_component_boundaries():
    options = OPTIONS["options"]
    ok = preflight.check_kubernetes_options(options, _target(kubernetes_version_prefix="1.32"))
    assert ok[1].status == "pass" and "1.32.5-do.2" in ok[1].detail
    # "1.3" is not a prefix of the 1.33 line; it must not match by string accident.
    bad = preflight.check_kubernetes_options(options, _target(kubernetes_version_prefix="1.3"))
    assert bad[1].status == "fail" and "1.32, 1.33" in bad[1].fix
    # The newest patch wins whatever order the API lists versions in.
    shuffled = dict(
        options,
        versions=[{"slug": "1.33.1-do.3", "kubernetes_version": "1.33.1"}, *reversed(options["versions"])],
    )
    assert "newest patch 1.33.1-do.5" in preflight.check_kubernetes_options(shuffled, _target())[1].detail
    retired = preflight.check_kubernetes_options(options, _target(kubernetes_version_prefix="1.29"))
    assert retired[1].status == "fail"


def test_region_without_doks_fails():
    checks = preflight.check_kubernetes_options(OPTIONS["options"], _target(region="nyc2"))
    assert checks[0].status == "fail" and "atl1, tor1" in checks[0].fix


@pytest.mark.parametrize(("size_gib", "status"), [(None, "pass"), (49, "fail"), (50, "pass"), (2048, "pass")])
def test_nfs_share_minimum(size_gib, status):
    assert preflight.check_nfs_size(size_gib).status == status


def test_missing_pulumi_fails_missing_kubectl_warns():
    checks = _by_name(preflight.check_local_tools(lambda name: None))
    assert checks["pulumi cli"].status == "fail"
    assert checks["kubectl"].status == "warn"
    present = _by_name(preflight.check_local_tools(_all_tools))
    assert present["pulumi cli"].status == present["kubectl"].status == "pass"


def test_no_token_is_one_failing_check_and_no_api_calls():
    checks = preflight.run_checks(_target(), None, which=_all_tools)
    token = _by_name(checks)["api token"]
    assert token.status == "fail" and "DIGITALOCEAN_TOKEN" in token.fix
    assert "region" not in _by_name(checks)
    assert preflight.exit_code(checks) == 1


# ------------------------------------------------------------------------------------ API errors


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            401,
            {"id": "unauthorized", "message": "Unable to authenticate you"},
            "401 Unauthorized: Unable to authenticate you",
        ),
        (
            403,
            {"id": "forbidden", "message": "You do not have access for the attempted action."},
            "403 Forbidden",
        ),
    ],
)
def test_auth_errors_stop_after_the_first_call(httpserver, status, body, expected):
    httpserver.expect_request("/v2/account").respond_with_json(body, status=status)
    checks = preflight.run_checks(_target(), _client(httpserver), which=_all_tools)
    token = _by_name(checks)["api token"]
    assert token.status == "fail" and expected in token.detail
    assert len(httpserver.log) == 1  # no pointless follow-up calls with a dead token
    assert TOKEN not in token.detail + token.fix
    assert [c.name for c in checks] == ["api token", "nfs share size", "pinned versions", "pulumi cli", "kubectl"]


def test_rate_limit_is_reported_with_the_wait_and_other_checks_still_run(httpserver):
    httpserver.expect_request("/v2/account").respond_with_json(ACCOUNT)
    httpserver.expect_request("/v2/regions").respond_with_json(_listing("regions", REGIONS))
    httpserver.expect_request("/v2/sizes").respond_with_json(
        {"id": "too_many_requests", "message": "API Rate limit exceeded."},
        status=429,
        headers={"Retry-After": "30", "ratelimit-limit": "5000", "ratelimit-remaining": "0"},
    )
    httpserver.expect_request("/v2/kubernetes/options").respond_with_json(OPTIONS)
    got = _by_name(preflight.run_checks(_target(), _client(httpserver), which=_all_tools))
    assert got["node sizes"].status == "fail"
    assert "429" in got["node sizes"].detail and "retry in 30 s" in got["node sizes"].fix
    assert got["kubernetes version"].status == "pass"
    assert got["region"].status == "pass"


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_are_reported_and_do_not_abort(httpserver, status):
    httpserver.expect_request("/v2/account").respond_with_json(
        {"id": "server_error", "message": "Unexpected server-side error"}, status=status
    )
    httpserver.expect_request("/v2/sizes").respond_with_json(_listing("sizes", SIZES))
    httpserver.expect_request("/v2/regions").respond_with_json(_listing("regions", REGIONS))
    httpserver.expect_request("/v2/kubernetes/options").respond_with_json(OPTIONS)
    checks = preflight.run_checks(_target(), _client(httpserver), which=_all_tools)
    got = _by_name(checks)
    assert got["api token"].status == "fail"
    assert f"({status}: Unexpected server-side error)" in got["api token"].detail
    assert "status.digitalocean.com" in got["api token"].fix
    assert got["region"].status == "pass"
    assert "droplet limit" not in got  # unknown without the account
    assert preflight.exit_code(checks) == 1


def test_html_error_page_from_a_proxy_is_still_a_clear_message(httpserver):
    httpserver.expect_request("/v2/account").respond_with_data("<html>Bad Gateway</html>", status=502)
    (token, *_rest) = preflight.run_checks(_target(), _client(httpserver), which=_all_tools)
    assert token.status == "fail" and "(502)" in token.detail


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_network_error_is_one_clear_failure():
    client = preflight.make_client(TOKEN, f"http://127.0.0.1:{_closed_port()}")
    checks = preflight.run_checks(_target(), client, which=_all_tools)
    token = _by_name(checks)["api token"]
    assert token.status == "fail" and token.detail.startswith("cannot reach the DigitalOcean API")
    assert "DIGITALOCEAN_API_URL" in token.fix
    assert [c.name for c in checks] == ["api token", "nfs share size", "pinned versions", "pulumi cli", "kubectl"]


# ------------------------------------------------------------------------------------ env + table


def test_token_and_url_follow_digitalocean_tool_conventions():
    assert preflight.token_from_env({"DIGITALOCEAN_TOKEN": "a", "DIGITALOCEAN_ACCESS_TOKEN": "b"}) == "a"
    assert preflight.token_from_env({"DIGITALOCEAN_TOKEN": " ", "DIGITALOCEAN_ACCESS_TOKEN": "b"}) == "b"
    assert preflight.token_from_env({}) is None
    assert preflight.api_url_from_env({}) == "https://api.digitalocean.com"
    assert (
        preflight.api_url_from_env({"DIGITALOCEAN_API_URL": "http://127.0.0.1:8080/"})
        == "http://127.0.0.1:8080"
    )


def test_table_shows_fixes_only_for_problems():
    table = doctor.render_checks(
        [
            Check("region", "pass", "atl1 is available", "never shown"),
            Check("pulumi cli", "fail", "`pulumi` is not on PATH", "install it"),
            Check("kubectl", "warn", "missing [redacted]", "install kubectl"),
        ],
        terminal=False,
    )
    assert table_rows(table) == [
        ["STATUS", "CHECK", "DETAIL", "FIX"],
        ["PASS", "region", "atl1 is available", ""],
        ["FAIL", "pulumi cli", "`pulumi` is not on PATH", "install it"],
        ["WARN", "kubectl", "missing [redacted]", "install kubectl"],  # text, not rich markup
    ]
    assert "never shown" not in table and "\x1b" not in table  # no colour codes off a terminal
    # columns line up: every line of the table is as wide as the first
    lines = table.splitlines()[:-2]
    assert len({len(line) for line in lines}) == 1 and lines[0].startswith("+-")
    assert table.splitlines()[-1] == "checks: 1 pass, 1 warn, 1 fail"


def test_on_a_terminal_the_table_has_colour_and_box_lines():
    table = doctor.render_checks([Check("pulumi cli", "fail", "missing", "install it")], terminal=True)
    assert "\x1b[" in table and "╭" in table and "FAIL" in table


# ------------------------------------------------------------------------------------ the command


def _fake_config(**model_cache):
    """The attributes of infra.config.StackConfig that doctor reads, nothing else."""
    return SimpleNamespace(
        region="atl1",
        cluster=SimpleNamespace(version="1.33", system_pool=SimpleNamespace(size="s-8vcpu-16gb", nodes=3)),
        gpu_pools=[
            SimpleNamespace(name="mi300x", size="gpu-mi300x8-1536gb", max_node_count=6),
            SimpleNamespace(name="mi325x", size="gpu-mi325x8-2048gb-contracted", max_node_count=1),
        ],
        model_cache=SimpleNamespace(**(model_cache or {"kind": "nfs", "size_gib": 2048})),
    )


def test_target_from_config_counts_every_pool_at_its_maximum():
    target = doctor.target_from_config(_fake_config())
    assert target.planned_max_nodes == 3 + 6 + 1
    assert [p.name for p in target.pools] == ["system", "mi300x", "mi325x"]
    assert target.nfs_size_gib == 2048 and target.kubernetes_version_prefix == "1.33"
    assert doctor.target_from_config(_fake_config(kind="none", size_gib=1024)).nfs_size_gib is None


@pytest.fixture
def cli(monkeypatch, tmp_path):
    """`infra.cli.main` with only the doctor command, fake pulumi/kubectl on PATH, a clean DO env."""
    import infra.cli

    monkeypatch.setattr(infra.cli, "COMMAND_MODULES", ["infra.commands.doctor"])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("pulumi", "kubectl"):
        exe = bin_dir / tool
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    for var in ("DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN", "DIGITALOCEAN_API_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(doctor, "load_stack_file", lambda stack, root=None: _fake_config())
    return infra.cli.main


def test_command_prints_the_table_and_exits_zero_when_nothing_fails(cli, httpserver, monkeypatch, capsys):
    _serve(httpserver)
    monkeypatch.setenv("DIGITALOCEAN_ACCESS_TOKEN", TOKEN)
    monkeypatch.setenv("DIGITALOCEAN_API_URL", httpserver.url_for("/"))
    assert cli(["doctor", "prod"]) == 0
    out = capsys.readouterr().out
    rows = {row[1]: row[0] for row in table_rows(out)}
    assert rows["pool mi325x size"] == "WARN" and rows["pool mi300x size"] == "PASS"
    # The fake answer's three sizes and 2025 prices are not the catalog's: a warning, not a failure.
    assert rows["catalog prices"] == "WARN"
    assert "checks: 11 pass, 2 warn, 0 fail" in out
    assert TOKEN not in out


def test_command_with_a_rejected_token_exits_one_without_traceback(cli, httpserver, monkeypatch, capsys):
    httpserver.expect_request("/v2/account").respond_with_json(
        {"id": "unauthorized", "message": "Unable to authenticate you"}, status=401
    )
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", TOKEN)
    monkeypatch.setenv("DIGITALOCEAN_API_URL", httpserver.url_for("/"))
    assert cli(["doctor", "prod"]) == 1
    captured = capsys.readouterr()
    assert "401 Unauthorized" in captured.out
    assert "Traceback" not in captured.out + captured.err


def test_command_without_a_token_exits_one(cli, capsys):
    assert cli(["doctor", "prod"]) == 1
    assert "no token in DIGITALOCEAN_TOKEN or DIGITALOCEAN_ACCESS_TOKEN" in capsys.readouterr().out


def _completed(returncode=0, stdout="", stderr=""):
    import subprocess

    return subprocess.CompletedProcess([], returncode, stdout, stderr)


def test_pulumi_config_token_is_asked_only_when_the_stack_declares_it():
    calls = []
    found = preflight.token_from_pulumi_config(
        "prod", "/repo", False, which=_all_tools, run=lambda *a, **k: calls.append(a) or _completed(0, TOKEN)
    )
    assert found.token is None and "not set in stacks/Pulumi.prod.yaml" in found.detail
    assert calls == []


def test_pulumi_config_token_is_decrypted_by_the_cli_for_the_right_stack():
    seen = {}

    def run(argv, **kwargs):
        seen["argv"], seen["env"] = argv, kwargs["env"]
        return _completed(0, TOKEN + "\n")

    found = preflight.token_from_pulumi_config("prod", "/repo", True, which=_all_tools, run=run)
    assert found.token == TOKEN and TOKEN not in found.detail
    assert seen["argv"][1:] == ["config", "get", "digitalocean:token", "--stack", "prod", "--cwd", "/repo"]
    assert seen["env"]["PULUMI_SKIP_UPDATE_CHECK"] == "true"


@pytest.mark.parametrize(
    ("which", "result", "expected"),
    [
        (lambda name: None, _completed(0, TOKEN), "pulumi CLI to decrypt it, and it is not on PATH"),
        (_all_tools, _completed(255, "", "\nerror: passphrase must be set with PULUMI_CONFIG_PASSPHRASE\n"), "failed: error: passphrase must be set"),
        (_all_tools, _completed(0, "  \n"), "is empty"),
    ],
)
def test_pulumi_config_token_failures_say_why(which, result, expected):
    found = preflight.find_token({}, "prod", "/repo", True, which=which, run=lambda *a, **k: result)
    assert found.token is None
    assert found.detail.startswith("no token in DIGITALOCEAN_TOKEN or DIGITALOCEAN_ACCESS_TOKEN; ")
    assert expected in found.detail


def test_environment_token_wins_over_pulumi_config():
    found = preflight.find_token({"DIGITALOCEAN_ACCESS_TOKEN": TOKEN}, "prod", "/repo", True, run=lambda *a, **k: pytest.fail("asked pulumi"))
    assert found == preflight.TokenLookup(TOKEN, "token from DIGITALOCEAN_ACCESS_TOKEN")


def test_command_reads_the_token_from_the_stack_secret_through_pulumi(cli, httpserver, monkeypatch, tmp_path, capsys):
    """No DO variables: the stack's digitalocean:token secret, via the (fake) Pulumi CLI."""
    _serve(httpserver)
    monkeypatch.setenv("DIGITALOCEAN_API_URL", httpserver.url_for("/"))
    root = make_project(tmp_path / "repo")
    (root / "stacks" / "Pulumi.prod.yaml").write_text(
        "config:\n  digitalocean:token:\n    secure: AAABAHsomeciphertext\n"
    )
    pulumi = Path(os.environ["PATH"].split(os.pathsep)[0]) / "pulumi"
    pulumi.write_text(
        "#!/bin/sh\n"
        f'[ "$*" = "config get digitalocean:token --stack prod --cwd {root}" ] || exit 3\n'
        f"echo {TOKEN}\n"
    )
    assert cli(["doctor", "prod", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "token from the stack's Pulumi config (digitalocean:token)" in out
    assert "checks: 11 pass, 2 warn, 0 fail" in out
    assert TOKEN not in out


def test_command_with_an_invalid_stack_exits_two(cli, monkeypatch, capsys):
    def broken(stack, root=None):
        raise ConfigError(f"no stack file stacks/Pulumi.{stack}.yaml; stacks: dev, prod, staging")

    monkeypatch.setattr(doctor, "load_stack_file", broken)
    assert cli(["doctor", "qa"]) == 2
    assert "no stack file stacks/Pulumi.qa.yaml" in capsys.readouterr().err


def test_real_stack_files_map_to_a_target():
    """The checked-in stacks, loaded by infra.config, reduce to the target doctor checks."""
    root = ROOT
    cfg = doctor.load_stack_file("prod", root)
    target = doctor.target_from_config(cfg)
    assert target.region == cfg.region
    assert target.pools[0].name == "system" and len(target.pools) == 1 + len(cfg.gpu_pools)
    assert target.planned_max_nodes == cfg.cluster.system_pool.nodes + sum(
        p.max_node_count for p in cfg.gpu_pools
    )
    assert target.nfs_size_gib == (cfg.model_cache.size_gib if cfg.model_cache.kind == "nfs" else None)


# ------------------------------------------------------------------------------------ robustness: secrets


def test_api_message_echoing_the_token_is_redacted(cli, httpserver, monkeypatch, capsys):
    """A server (or proxy) that echoes the Authorization header in its error must not print it."""
    httpserver.expect_request("/v2/account").respond_with_json(
        {"id": "bad_request", "message": f"invalid header Bearer {TOKEN} (token {TOKEN[7:]})"}, status=400
    )
    for path in ("/v2/sizes", "/v2/regions", "/v2/kubernetes/options"):
        httpserver.expect_request(path).respond_with_json(
            {"id": "bad_request", "message": f"Authorization: {TOKEN}"}, status=400
        )
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", TOKEN)
    monkeypatch.setenv("DIGITALOCEAN_API_URL", httpserver.url_for("/"))
    assert cli(["doctor", "prod"]) == 1
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert "(400: invalid header Bearer [redacted]" in out
    assert TOKEN not in out and TOKEN[7:] not in out and TOKEN[20:40] not in out
    assert "Traceback" not in out


def test_custom_token_echoed_by_the_api_is_redacted(httpserver):
    token = "not-a-do-token-Secr3tValue"
    httpserver.expect_request("/v2/account").respond_with_json({"message": f"no user for {token}"}, status=400)
    httpserver.expect_request("/v2/sizes").respond_with_json(_listing("sizes", SIZES))
    httpserver.expect_request("/v2/regions").respond_with_json(_listing("regions", REGIONS))
    httpserver.expect_request("/v2/kubernetes/options").respond_with_json(OPTIONS)
    client = preflight.make_client(token, httpserver.url_for("").rstrip("/"))
    checks = preflight.run_checks(_target(), client, which=_all_tools, secrets=[token])
    text = doctor.render_checks(checks)
    assert "no user for [redacted]" in text and token not in text


@pytest.mark.parametrize(
    ("bad", "what"),
    [
        (TOKEN[:20] + "\n" + TOKEN[20:], "a line break at character 21"),
        (TOKEN[:20] + "\u200b" + TOKEN[20:], "a non-ASCII character (U+200B) at character 21"),
        (TOKEN[:20] + " " + TOKEN[20:], "a space at character 21"),
        (TOKEN[:20] + "\x07" + TOKEN[20:], "a control character (U+0007)"),
    ],
)
def test_token_with_whitespace_control_or_non_ascii_is_rejected_up_front(cli, httpserver, monkeypatch, capsys, bad, what):
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", bad)
    monkeypatch.setenv("DIGITALOCEAN_API_URL", httpserver.url_for("/"))
    assert cli(["doctor", "prod"]) == 1
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert f"the token in DIGITALOCEAN_TOKEN contains {what}" in out
    assert "without spaces, line breaks or invisible characters" in out
    assert TOKEN[:20] not in out and TOKEN[21:] not in out and TOKEN[20:] not in out
    assert "Traceback" not in out
    assert len(httpserver.log) == 0  # never sent


def test_bad_token_from_pulumi_config_is_rejected_too():
    result = _completed(0, TOKEN[:10] + "\r" + TOKEN[10:] + "\n")
    found = preflight.find_token({}, "prod", "/repo", True, which=_all_tools, run=lambda *a, **k: result)
    assert found.token is None and "contains a line break at character 11" in found.detail
    assert TOKEN[:10] not in found.detail and found.fix


def test_header_value_error_never_prints_the_token(httpserver):
    """Defence in depth: a token the up-front check did not see, refused by the HTTP stack, whose
    error quotes the header value (escaped) — the detail still carries no part of it."""
    bad = TOKEN[:30] + "\n" + TOKEN[30:]
    client = preflight.make_client(bad, httpserver.url_for("").rstrip("/"))
    checks = preflight.run_checks(_target(), client, which=_all_tools, secrets=[bad])
    token = _by_name(checks)["api token"]
    assert token.status == "fail" and "header value" in token.detail
    assert TOKEN[:30] not in token.detail and TOKEN[30:] not in token.detail
    assert "[redacted]" in token.detail


def test_non_ascii_token_sent_anyway_is_a_failing_check_not_a_crash(httpserver):
    bad = TOKEN + "\u200b"
    client = preflight.make_client(bad, httpserver.url_for("").rstrip("/"))
    checks = preflight.run_checks(_target(), client, which=_all_tools, secrets=[bad])
    token = _by_name(checks)["api token"]
    assert token.status == "fail" and "UnicodeEncodeError" in token.detail
    assert [c.name for c in checks] == ["api token", "nfs share size", "pinned versions", "pulumi cli", "kubectl"]


def test_redact_masks_bearer_do_tokens_secrets_and_url_credentials():
    text = f"Bearer abc.def.ghi x dop_v1_{'f' * 64} https://user:pw@api.example.com/v2 my-secret-123"
    got = preflight.redact(text, ["my-secret-123"])
    assert got == "Bearer [redacted] x [redacted] https://[redacted]@api.example.com/v2 [redacted]"
    assert preflight.redact(got, ["my-secret-123"]) == got  # idempotent
    assert preflight.redact("https://api.digitalocean.com") == "https://api.digitalocean.com"


def test_credentials_in_the_api_url_are_not_echoed(cli, httpserver, monkeypatch, capsys):
    _serve(httpserver)
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", TOKEN)
    url = httpserver.url_for("/").replace("http://", "http://admin:hunter2@")
    monkeypatch.setenv("DIGITALOCEAN_API_URL", url)
    cli(["doctor", "prod"])
    out = capsys.readouterr().out
    assert "hunter2" not in out and "admin" not in out
    assert "API http://[redacted]@" in out.splitlines()[0]


# ------------------------------------------------------------------------------------ robustness: answers


@pytest.mark.parametrize(
    ("route", "body", "check", "expected"),
    [
        ("/v2/account", [ACCOUNT], "api token", "GET /v2/account: the body is a list, expected an object"),
        ("/v2/account", {"account": None}, "api token", "GET /v2/account: `account` is null, expected an object"),
        ("/v2/account", {"account": {"status": "active", "droplet_limit": "25"}}, "droplet limit", "`account.droplet_limit` is a string"),
        ("/v2/regions", {"regions": REGIONS, "meta": {"total": "3"}}, "region", "`meta.total` is a string, expected an integer"),
        ("/v2/regions", {"regions": ["atl1"], "meta": {"total": 1}}, "region", "`regions[0]` is a string, expected an object"),
        ("/v2/sizes", {"sizes": [dict(SIZES[0], regions=7)], "meta": {"total": 1}}, "node sizes", "GET /v2/sizes: `sizes[0].regions` is a number, expected a list"),
        ("/v2/sizes", {"sizes": [dict(SIZES[0], gpu_info={"count": "8"})], "meta": {"total": 1}}, "node sizes", "`sizes[0].gpu_info.count` is a string, expected an integer"),
        ("/v2/account", {"account": {"status": "active", "droplet_limit": -1}}, "droplet limit", "`account.droplet_limit` is -1, expected a whole number"),
        ("/v2/account", {"account": {"status": 1, "droplet_limit": 25}}, "api token", "`account.status` is a number, expected a string"),
        ("/v2/kubernetes/options", [OPTIONS], "kubernetes options", "GET /v2/kubernetes/options: the body is a list"),
        ("/v2/kubernetes/options", {"options": {"versions": {"1.33": {}}}}, "kubernetes options", "`options.versions` is an object, expected a list"),
    ],
)
def test_malformed_answers_are_failing_checks(httpserver, route, body, check, expected):
    answers = {
        "/v2/account": ACCOUNT,
        "/v2/sizes": _listing("sizes", SIZES),
        "/v2/regions": _listing("regions", REGIONS),
        "/v2/kubernetes/options": OPTIONS,
        route: body,
    }
    for path, answer in answers.items():
        httpserver.expect_request(path).respond_with_json(answer)
    checks = preflight.run_checks(_target(), _client(httpserver), which=_all_tools)
    got = _by_name(checks)[check]
    assert got.status == "fail" and expected in got.detail and got.fix
    assert preflight.exit_code(checks) == 1


def test_account_null_is_a_failing_check_not_a_silent_skip(httpserver):
    _serve(httpserver, account={"account": None})
    checks = preflight.run_checks(_target(), _client(httpserver), which=_all_tools)
    assert _by_name(checks)["api token"].status == "fail"
    assert preflight.exit_code(checks) == 1
    assert _by_name(checks)["region"].status == "pass"  # the other endpoints are still asked


def test_non_json_success_body_is_a_failing_check(httpserver):
    httpserver.expect_request("/v2/account").respond_with_data("<html>captive portal</html>", content_type="text/html")
    httpserver.expect_request("/v2/sizes").respond_with_json(_listing("sizes", SIZES))
    httpserver.expect_request("/v2/regions").respond_with_json(_listing("regions", REGIONS))
    httpserver.expect_request("/v2/kubernetes/options").respond_with_json(OPTIONS)
    token = _by_name(preflight.run_checks(_target(), _client(httpserver), which=_all_tools))["api token"]
    assert token.status == "fail" and "unexpected answer from GET /v2/account" in token.detail


def test_endless_pagination_stops(httpserver):
    httpserver.expect_request("/v2/regions").respond_with_json({"regions": REGIONS[:1], "meta": {"total": 10**9}})
    with pytest.raises(preflight.MalformedAnswer, match="after 100 pages"):
        preflight._all_pages(_client(httpserver).regions.list, "regions")


def test_empty_offer_lists_say_none_offered():
    assert "none offered" in preflight.check_region([], "atl1").fix
    region, version = preflight.check_kubernetes_options({"regions": [], "versions": []}, _target())
    assert region.status == version.status == "fail"
    assert "none offered" in region.fix and "none offered" in version.fix
    assert not region.fix.endswith(": ") and "one of: " not in version.fix


def test_negative_retries_exit_two(cli, capsys):
    with pytest.raises(SystemExit) as exc:
        cli(["doctor", "prod", "--retries", "-3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --retries: must be a whole number at least 0, got -3" in err and "Traceback" not in err


@pytest.mark.parametrize("url", ["not a url", "ftp://example.com", "http://[::1", "https://user:hunter2@h:99999"])
def test_unusable_api_url_exits_two_without_echoing_credentials(cli, monkeypatch, capsys, url):
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", TOKEN)
    monkeypatch.setenv("DIGITALOCEAN_API_URL", url)
    assert cli(["doctor", "prod"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: DIGITALOCEAN_API_URL ") and "http(s) URL" in err
    assert len(err.strip().splitlines()) == 1 and "hunter2" not in err


def test_exact_doks_version_slug_is_checked_as_offered_or_not():
    options = OPTIONS["options"]
    exact = preflight.check_kubernetes_options(options, _target(kubernetes_version_prefix="1.33.1-do.5"))
    assert exact[1].status == "pass"
    gone = preflight.check_kubernetes_options(options, _target(kubernetes_version_prefix="1.33.1-do.1"))
    assert gone[1].status == "fail"


def test_a_bad_account_field_fails_only_the_check_that_reads_it_and_never_echoes_it(httpserver):
    _serve(httpserver, account={"account": {"status": "active", "email": "a@b.c", "droplet_limit": "secret-ish value"}})
    checks = _by_name(preflight.run_checks(_target(), _client(httpserver), which=_all_tools))
    assert checks["api token"].status == "pass"
    limit = checks["droplet limit"]
    assert limit.status == "fail" and "`account.droplet_limit` is a string, expected a whole number" in limit.detail
    assert "secret-ish" not in limit.detail


# --- an API that accepts the connection and never answers ---------------------------------------


@pytest.fixture
def silent_api():
    """A local server that accepts connections and never sends a byte (a hung proxy or API)."""
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(timeout=2)
    for conn in held:
        conn.close()
    server.close()


def test_client_timeouts_default_to_five_and_thirty_seconds():
    client = preflight.make_client(TOKEN, "http://127.0.0.1:9")
    config = client._client._pipeline._transport.connection_config
    assert (config.timeout, config.read_timeout) == (5.0, 30.0)


def test_doctor_gives_up_on_an_api_that_never_answers(cli, silent_api, monkeypatch, capsys):
    # Before: pydo's `timeout=` never reached the socket and doctor waited 300 s per call.
    import time

    monkeypatch.setenv("DIGITALOCEAN_TOKEN", TOKEN)
    monkeypatch.setenv("DIGITALOCEAN_API_URL", silent_api)
    start = time.monotonic()
    assert cli(["doctor", "prod", "--read-timeout", "0.5"]) == 1
    assert time.monotonic() - start < 10
    out = capsys.readouterr().out
    assert "accepted the connection but sent no answer in time" in out and "--read-timeout" in out


def test_doctor_timeouts_come_from_the_environment(cli, silent_api, monkeypatch, capsys):
    import time

    monkeypatch.setenv("DIGITALOCEAN_TOKEN", TOKEN)
    monkeypatch.setenv("DIGITALOCEAN_API_URL", silent_api)
    monkeypatch.setenv(preflight.READ_TIMEOUT_ENV_VAR, "0.5")
    start = time.monotonic()
    assert cli(["doctor", "prod"]) == 1
    assert time.monotonic() - start < 10


def test_an_api_url_with_a_path_is_refused_before_any_call(cli, monkeypatch, capsys):
    # Before: /v2/v2/account answered 404, reported as "re-run with a fresh token".
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", TOKEN)
    monkeypatch.setenv("DIGITALOCEAN_API_URL", "https://api.digitalocean.com/v2")
    assert cli(["doctor", "prod"]) == 2
    err = capsys.readouterr().err
    assert "has a path (/v2)" in err and "base URL only" in err


def test_a_404_points_at_the_api_url_not_the_token(httpserver):
    httpserver.expect_request("/v2/account").respond_with_json({"id": "not_found", "message": "nope"}, status=404)
    (token, *_rest) = preflight.run_checks(_target(), _client(httpserver), which=_all_tools)
    assert "404 Not Found" in token.detail and preflight.API_URL_ENV_VAR in token.fix and "fresh token" not in token.fix
