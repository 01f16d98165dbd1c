"""`infra layout --turns-per-session`: hit rate and goodput with and without a KV offload tier (issue 26)."""

from __future__ import annotations

import json

import pytest

from infra.errors import UserError
from tests.commands.test_layout import run

CHAT = [
    "layout", "--model", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "--gpu", "gpu-mi300x8-1536gb",
    "--input-tokens", "5600", "--output-tokens", "300", "--ttft-p90-ms", "2000", "--tpot-p90-ms", "50",
    "--turns-per-session", "8", "--think-time-s", "300",
]


def test_json_has_the_candidates_and_both_tiers(capsys):
    assert run(CHAT + ["--json", "--top", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["candidates"]) == 3
    pc = doc["prefix_cache"]
    assert pc["enabled"] and pc["with_offload"]["kv_offload"]["kind"] == "cpu"
    assert pc["with_offload"]["hit_rate"]["total"] > pc["without_offload"]["hit_rate"]["total"]
    assert pc["with_offload"]["goodput_rps_per_node"] > pc["without_offload"]["goodput_rps_per_node"]


def test_table_shows_hit_rate_and_goodput_with_and_without(capsys):
    assert run(CHAT + ["--kv-offload", "cpu:300", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "without offload" in out and "with offload" in out and "cpu 300 GiB" in out
    assert "kv_offload cpu as configured" in out


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--gpu", "gpu-mi300x8-1536gb,gpu-mi325x8-2048gb"], "name one --gpu"),
        (["--prefix-cache-hit-rate", "0.3"], "leave --prefix-cache-hit-rate out"),
        (["--kv-offload", "cpu:0"], "use none, auto or cpu:GIB"),
        (["--kv-offload", "lmcache:10"], "use none, auto or cpu:GIB"),
        (["--kv-offload", "cpu:5000"], "has"),
        (["--turns-per-session", "40"], "turns of 300-token answers"),
    ],
)
def test_session_mistakes_are_one_line_errors(extra, needle):
    argv = list(CHAT)
    if extra[0] == "--gpu":
        argv[argv.index("--gpu") + 1] = extra[1]
    elif extra[0] == "--turns-per-session":
        argv[argv.index("--turns-per-session") + 1] = extra[1]
    else:
        argv += extra
    with pytest.raises(UserError, match=needle):
        run(argv)
