"""The stack's resources as a plain value: placeholders (values.py), the graph (graph.py), the plan
file's records of it (records.py) and what the offline plan shows for cloud-only values
(offline_values.py). No Pulumi here: `infra/declare.py` wraps the graph."""
