"""SLO-gated layout rollouts (`models[].rollout`): a candidate layout beside the current one.

Pure logic only, no Pulumi, config or renderer imports: how a step's weight becomes engine
replicas behind the vLLM router (split.py), and what the SLO gate decides from per-variant
numbers (gate.py). The stack-file edits of `infra rollout promote|abort` are in stackfile.py,
the Prometheus reads of `infra rollout status` in prometheus.py.
"""
