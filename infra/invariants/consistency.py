"""One number: notes, model lines, the cost table and the JSON say the same thing.

The plan's views are all read from the one StackPlan value; this checks that the figures a reader
compares (nodes a peak needs, the pools' node range, the replicas at the pool's bounds, the cost
at the pools' bounds) agree wherever they are repeated. A disagreement is a bug of the toolkit,
reported as a plan problem so it is never shipped silently.
"""

from __future__ import annotations

import re

from infra.errors import Problem
from infra.invariants.keypaths import KeyPaths

_PEAK_NOTE = re.compile(r"^model (?P<model>\S+): peak \S+ req/s needs (?P<nodes>\d+) nodes of ")


def check_consistency(plan_json: dict, paths: KeyPaths) -> list[Problem]:
    problems = []
    models = {m["name"]: m for m in plan_json.get("models", [])}
    for note in (plan_json.get("summary") or {}).get("notes", []):
        match = _PEAK_NOTE.match(note)
        if not match or match["model"] not in models:
            continue
        m = models[match["model"]]
        line = (m.get("measured") or {}).get("nodes_needed") if m.get("measured") else m["predicted"].get("nodes_needed")
        if line is not None and int(match["nodes"]) != int(line):
            problems.append(Problem(paths.model(m["name"], "workload.peak_rps") or "", (
                f"the plan contradicts itself: a note says peak needs {match['nodes']} nodes, the model line {line} "
                "(a toolkit bug; please report it)")))
    pools = {p["name"]: p for p in (plan_json.get("summary") or {}).get("pools", [])}
    cost = {i["item"]: i for i in (plan_json.get("cost") or {}).get("items", [])}
    for name, pool in pools.items():
        item = cost.get(f"gpu:{name}")
        price = pool.get("usd_per_node_hour")
        if item is None or price is None:
            continue
        for bound, nodes in (("min", pool["min_nodes"]), ("max", pool["max_nodes"])):
            if abs(item[f"usd_per_hour_{bound}"] - round(price * nodes, 2)) > 0.011:
                problems.append(Problem(paths.pool(name) or "", (
                    f"the plan contradicts itself: the cost table's {bound} for pool {name} is "
                    f"{item[f'usd_per_hour_{bound}']}, {nodes} nodes × {price} (a toolkit bug; please report it)")))
    return problems
