"""Facts the toolkit is built on: GPU sizes, regions, model architectures, pinned versions.

Catalog modules hold data, not logic, and import nothing from Pulumi. Data that tools rewrite or
check lives in files beside them: gpu_sizes.json (`infra catalog sync`), support_matrix.yaml
(infra/compat.py), efficiency.json, vllm_flags.json.
"""
