"""`infra layout` end to end (table, JSON, filters, closed-loop mode, user errors)."""

from __future__ import annotations

import argparse
import json

import pytest

from infra import cli
from infra.commands import layout as layout_cmd
from infra.errors import UserError
from tests.conftest import table_rows
from tests.planner.test_search import JSON_KEYS

BASE = [
    "layout",
    "--model",
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
    "--gpu",
    "gpu-mi325x8-2048gb-contracted",
    "--input-tokens",
    "2000",
    "--output-tokens",
    "300",
    "--ttft-p90-ms",
    "2000",
    "--tpot-p90-ms",
    "50",
]


def run(argv):
    parser = argparse.ArgumentParser(prog="infra")
    layout_cmd.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


def test_layout_is_registered_with_the_cli():
    assert "infra.commands.layout" in cli.COMMAND_MODULES


def test_json_is_a_list_best_first(capsys):
    assert run(BASE + ["--peak-rps", "40", "--usd-per-hour", "24", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert isinstance(items, list) and len(items) > 5
    fitting = [i for i in items if i["fits"]]
    # layouts held back unmeasured (too little KV room) rank after the others, each group by goodput
    order = [("held_back" in i, -i["goodput_rps_per_node"]) for i in fitting]
    assert order == sorted(order)
    first = items[0]
    assert JSON_KEYS <= set(first)
    assert first["nodes_needed"] >= 1 and first["usd_per_million_output_tokens"] > 0


def test_table_lists_every_candidate_and_the_reason(capsys):
    assert run(BASE + ["--top", "3"]) == 0
    out = capsys.readouterr().out
    header, *rows = table_rows(out)
    assert header[:3] == ["layout", "fits", "kv tokens"] and header[-1] == "reason"
    assert len(rows) == 3 and all(row[1] == "yes" for row in rows)
    goodput = [float(row[header.index("req/s/node")]) for row in rows]
    assert goodput == sorted(goodput, reverse=True)
    assert "chose " in out and "contract-priced" in out


def test_filters_and_closed_loop_mode(capsys):
    assert (
        run(
            BASE
            + [
                "--tp",
                "8",
                "--no-ep",
                "--dp",
                "1",
                "--replicas-per-node",
                "1",
                "--concurrency",
                "128",
                "--json",
            ]
        )
        == 0
    )
    items = json.loads(capsys.readouterr().out)
    assert [i["name"] for i in items] == ["tp8-r1"]
    for key in (
        "concurrency",
        "total_tokens_per_s_per_node",
        "output_tokens_per_s_per_node",
        "ttft_mean_ms",
        "tpot_mean_ms",
    ):
        assert key in items[0]
    assert items[0]["concurrency"] == 128


def test_model_may_be_a_local_config_json(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "hidden_size": 4096,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "intermediate_size": 14336,
                "vocab_size": 128256,
                "max_position_embeddings": 131072,
            }
        )
    )
    argv = [
        "layout",
        "--model",
        str(cfg),
        "--gpu",
        "gpu-h100x8-640gb",
        "--input-tokens",
        "1000",
        "--output-tokens",
        "200",
        "--ttft-p90-ms",
        "1000",
        "--tpot-p90-ms",
        "40",
        "--json",
    ]
    assert run(argv) == 0
    items = json.loads(capsys.readouterr().out)
    assert items[0]["fits"] and items[0]["usd_per_million_output_tokens"] > 0


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (["--model", "acme/never-heard-of-it"], "not in the model catalog"),
        (["--gpu", "gpu-imaginary"], "not a GPU size we know"),
        (["--tp", "3"], "no layout"),
    ],
)
def test_user_mistakes_are_one_line_errors(change, needle):
    with pytest.raises(UserError, match=needle):
        run(_with(change))


def _with(change):
    argv = list(BASE)
    for i in range(0, len(change), 2):
        if change[i] in argv:
            argv[argv.index(change[i]) + 1] = change[i + 1]
        else:
            argv += change[i : i + 2]
    return argv


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--top", "0"),
        ("--top", "-1"),
        ("--usd-per-hour", "-3"),
        ("--usd-per-hour", "0"),
        ("--usd-per-hour", "nan"),
        ("--input-tokens", "0"),
        ("--output-tokens", "-5"),
        ("--ttft-p90-ms", "0"),
        ("--tpot-p90-ms", "-1"),
        ("--peak-rps", "0"),
        ("--concurrency", "0"),
        ("--tp", "0"),
        ("--dp", "-2"),
        ("--replicas-per-node", "0"),
        ("--prefix-cache-hit-rate", "1"),
        ("--top", "two"),
    ],
)
def test_out_of_range_numbers_are_refused_by_the_parser(flag, value, capsys):
    """Through the real CLI: exit 2 and an argparse error naming the flag and the value."""
    with pytest.raises(SystemExit) as exc:
        cli.main(_with([flag, value]))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}:" in err and value in err
    assert "Traceback" not in err


def test_top_n_shows_exactly_n(capsys):
    assert run(BASE + ["--top", "1", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["bench", "staging", "qwen3-235b", "--seconds-per-rate", "0"], "--seconds-per-rate"),
        (["bench", "staging", "qwen3-235b", "--min-prompts", "-1"], "--min-prompts"),
        (["tune", "ingest", "r.json", "--ttft-p90-ms", "-5", "--tpot-p90-ms", "50"], "--ttft-p90-ms"),
        (["tune", "ingest", "r.json", "--ttft-p90-ms", "2000", "--tpot-p90-ms", "nan"], "--tpot-p90-ms"),
        (["tune", "ingest", "r.json", "--max-failed-fraction", "1.5"], "--max-failed-fraction"),
        (["doctor", "prod", "--retries", "x"], "--retries"),
    ],
)
def test_every_command_refuses_out_of_range_numbers_the_same_way(argv, flag, capsys):
    """The shared argument types (infra/cli_args.py): argparse names the flag, exit 2, no work done."""
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}:" in err and "Traceback" not in err


COMPARE = [a if a != "gpu-mi325x8-2048gb-contracted" else "gpu-mi300x8-1536gb,gpu-mi325x8-2048gb,gpu-h200x8-1128gb" for a in BASE]


def test_several_gpus_are_ranked_by_cost_per_token_with_their_bands(capsys):
    assert run(COMPARE + ["--json"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert {i["gpu"] for i in items} == {"gpu-mi300x8-1536gb", "gpu-mi325x8-2048gb", "gpu-h200x8-1128gb"}
    costs = [i["usd_per_million_output_tokens"] for i in items]
    assert costs == sorted(costs)  # all three sizes are list-priced: cheapest first
    for i in items:
        low, high = i["usd_per_million_output_tokens_band"]
        assert low <= i["usd_per_million_output_tokens"] <= high
        g_low, g_high = i["goodput_band_rps_per_node"]
        assert g_low <= i["goodput_rps_per_node"] <= g_high


def test_the_comparison_table_ends_with_a_one_line_verdict(capsys):
    assert run(COMPARE) == 0
    out = capsys.readouterr().out
    assert "cheapest within the SLO: gpu-" in out
    assert "uncertainty bands overlap" in out or "outside each other's uncertainty bands" in out


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--usd-per-hour", "20"], "--usd-per-hour"),
        (["--concurrency", "8"], "--concurrency"),
    ],
)
def test_one_gpu_options_are_refused_with_several(extra, needle, capsys):
    with pytest.raises(UserError, match=needle):
        run(COMPARE + extra)


def test_region_filters_only_all(capsys):
    with pytest.raises(UserError, match="--region filters `--gpu all`"):
        run(COMPARE + ["--region", "atl1"])
    bad = [a if a != "gpu-mi325x8-2048gb-contracted" else "gpu-mi300x8-1536gb,gpu-nope" for a in BASE]
    with pytest.raises(UserError, match="'gpu-nope' is not a GPU size we know"):
        run(bad)


def test_fabric_ranks_multi_node_candidates_with_reasons(capsys):
    argv = [
        "layout", "--model", "unsloth/DeepSeek-R1-BF16", "--gpu", "gpu-mi325x8-2048gb-fabric-contracted",
        "--input-tokens", "5600", "--output-tokens", "140", "--ttft-p90-ms", "2000", "--tpot-p90-ms", "50",
        "--fabric", "--no-pd", "--json",
    ]
    assert run(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    wide = [r for r in rows if r["nodes_per_replica"] > 1]
    assert {"tp8-ep-dp2-n2", "tp16-n2"} <= {r["name"] for r in wide}
    assert all(r["replicas_per_node"] == 1 and "RDMA fabric" in r["reason"] for r in wide if r["fits"])
    assert run([a for a in argv if a != "--json"]) == 0
    text = capsys.readouterr().out
    assert "2 nodes over RDMA" in text and "multi-node layout" in text
