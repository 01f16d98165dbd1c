"""`infra bench --dataset multi-turn`: the conversation trace and the sweep that replays it (issue 26)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from infra.errors import UserError
from infra.tuning import bench, multi_turn_trace
from infra.tuning.bench_flags import known_bench_flags
from tests.tuning.test_bench import LAYOUT, OPTS, _target

MT = replace(OPTS, dataset=bench.MULTI_TURN)


def _chat_target():
    t = _target()
    return replace(t, workload=replace(t.workload, input_tokens=5600, turns_per_session=8, think_time_s=30.0))


def test_each_turn_resends_the_previous_one_and_adds_fresh_chunks():
    lines = multi_turn_trace.trace(rate_rps=4.0, requests=400, turns=4, new_tokens=100, output_tokens=50,
                                   think_time_s=5.0, answer_s=1.0, seed=1)
    assert len(lines) == 400
    assert [line["timestamp"] for line in lines] == sorted(line["timestamp"] for line in lines)
    by_prefix = {tuple(line["hash_ids"]): line for line in lines}
    follow_ups = [line for line in lines if len(line["hash_ids"]) > 7]  # turn 1 has ceil(100/16) = 7 chunks
    assert follow_ups
    for line in follow_ups:
        ids = line["hash_ids"]
        grown = [p for p in by_prefix if len(p) < len(ids) and tuple(ids[: len(p)]) == p]
        # the previous turn's chunks, then ceil(50/16) = 4 answer and 7 new chunks
        assert grown and len(ids) - max(len(p) for p in grown) == 4 + 7
        assert line["input_length"] == len(ids) * multi_turn_trace.CHUNK_TOKENS


def test_the_trace_runs_as_a_standalone_script(tmp_path):
    """It is shipped into the client pod as text: no imports from this project."""
    script = tmp_path / "t.py"
    script.write_text(Path(multi_turn_trace.__file__).read_text())
    out = subprocess.run([sys.executable, str(script), "--rate", "2", "--requests", "20", "--turns", "3",
                          "--new-tokens", "64", "--output-tokens", "32", "--think-time-s", "4"],
                         capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 20 and {"timestamp", "input_length", "output_length", "hash_ids"} <= set(rows[0])


def test_the_sweep_writes_a_trace_per_rate_and_replays_it_self_timed():
    target = _chat_target()
    args = bench.bench_serve_args(target, LAYOUT, 2.0, 200, MT, base_url="http://x:8000", result_dir="/r")
    assert args[args.index("--dataset-name") + 1] == "timed_trace"
    assert args[args.index("--dataset-path") + 1] == bench.TRACE_FILE
    assert "--burstiness" not in args and "--random-input-len" not in args
    assert bench.unknown_bench_flags(args) == []
    assert "timed_trace" in known_bench_flags()["dataset_names"]
    meta = args[args.index("--metadata") + 1:]
    assert {"workload=multi-turn", "turns_per_session=8", "think_time_s=30"} <= set(meta)
    script = bench.sweep_script(target, bench.make_sweep(LAYOUT, (1.0, 2.0), MT), MT, base_url="http://x", result_dir="/r")
    assert f"cat > {bench.TRACE_SCRIPT} <<'MULTI_TURN_TRACE'" in script
    assert f'python3 {bench.TRACE_SCRIPT} --rate "$1" --requests "$2" --turns 8' in script
    subprocess.run(["sh", "-n"], input=script, text=True, check=True)


def test_single_turn_workloads_cannot_replay_sessions():
    with pytest.raises(UserError, match="turns_per_session"):
        bench.multi_turn_trace_args(_target(), MT)
