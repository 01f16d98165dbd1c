"""Measured tuning: benchmark sweeps on the cluster, goodput per layout, the winner written back.

The planner predicts; these modules read what `vllm bench serve` measured (results), find the
highest request rate each layout sustains within the p90 SLOs (goodput), draw it (chart), record
the winner in the stack file (stackfile), render the benchmark Jobs (bench) and re-fit the
planner's efficiency factors (calibrate). All pure: no Pulumi, no network.
"""
