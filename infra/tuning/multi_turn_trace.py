"""A multi-turn chat trace for `vllm bench serve --dataset-name timed_trace` (stdlib only).

vLLM's `timed_trace` dataset (vllm/benchmarks/datasets/datasets.py `TimedTrace`, the Mooncake
trace format) replays one request per JSON line at its `timestamp` (seconds), with a prompt of
`input_length` tokens built from `hash_ids`: each id stands for one chunk of
`--timed-trace-chunk-hash-size` tokens, the same id always for the same tokens. A conversation is
therefore a sequence of turns whose hash ids repeat the previous turn's (its history) and add
the answer's and the user's new chunks; the engine's prefix cache can serve exactly the repeated
part, as it serves a real chat's history.

Sessions start as a Poisson process at rate / turns (so turns arrive at `rate` req/s once the
sessions overlap); a session's next turn follows the previous one after an exponential think time
(mean `think_time_s`) plus the time its answer takes at the TPOT limit. The answer chunks carry
fresh ids: the engine's real answer differs from the trace's, so those tokens miss (a real
client re-sends the answer it got, which the cache may hold: a real chat hits a little more).

`infra bench --dataset multi-turn` runs this file inside the benchmark client pod (the vLLM image
has Python) to write one trace per request rate; it must stay standalone (no imports from this
project) because only its text is shipped.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys

CHUNK_TOKENS = 16  # tokens per hash id (vLLM's default --timed-trace-chunk-hash-size)


def session_turns(
    rng: random.Random, next_id: list[int], *, turns: int, new_tokens: int, output_tokens: int
) -> list[tuple[int, list[int]]]:
    """(input tokens, hash ids) of each turn of one session."""
    def fresh(tokens: int) -> list[int]:
        ids = list(range(next_id[0], next_id[0] + math.ceil(tokens / CHUNK_TOKENS)))
        next_id[0] += len(ids)
        return ids

    out, history = [], []
    for k in range(turns):
        ids = history + (fresh(output_tokens) if k else []) + fresh(new_tokens)
        out.append((len(ids) * CHUNK_TOKENS, ids))
        history = ids
    return out


def trace(
    *, rate_rps: float, requests: int, turns: int, new_tokens: int, output_tokens: int, think_time_s: float,
    answer_s: float, seed: int = 0,
) -> list[dict]:
    """The first `requests` turns by time, of sessions arriving at rate_rps / turns."""
    rng = random.Random(seed)
    next_id = [1]
    lines: list[dict] = []
    start = 0.0
    sessions = math.ceil(requests / turns) * 2 + turns  # enough that the earliest `requests` turns are complete
    for _ in range(sessions):
        start += rng.expovariate(rate_rps / turns)
        t = start
        for input_len, ids in session_turns(rng, next_id, turns=turns, new_tokens=new_tokens, output_tokens=output_tokens):
            lines.append({"timestamp": round(t, 3), "input_length": input_len, "output_length": output_tokens, "hash_ids": ids})
            t += answer_s + rng.expovariate(1.0 / think_time_s)
    lines.sort(key=lambda line: line["timestamp"])
    return lines[:requests]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, required=True, help="turns per second once sessions overlap")
    p.add_argument("--requests", type=int, required=True)
    p.add_argument("--turns", type=int, required=True)
    p.add_argument("--new-tokens", type=int, required=True)
    p.add_argument("--output-tokens", type=int, required=True)
    p.add_argument("--think-time-s", type=float, required=True)
    p.add_argument("--answer-s", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    for line in trace(rate_rps=a.rate, requests=a.requests, turns=a.turns, new_tokens=a.new_tokens,
                      output_tokens=a.output_tokens, think_time_s=a.think_time_s, answer_s=a.answer_s, seed=a.seed):
        sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
