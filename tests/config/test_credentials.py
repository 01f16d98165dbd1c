"""The one credential scan (infra/config/credentials.py): what it refuses, and what it leaves alone."""

from __future__ import annotations

import pytest

from infra.config.credentials import credential_problems
from infra.config.load import read_stack_file
from tests.conftest import ROOT


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_shipped_stacks_hold_no_credential(stack):
    values, _ = read_stack_file(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    assert credential_problems(values) == []


@pytest.mark.parametrize("values", [
    {"inference-platform:models": [{"env": {"VLLM_ALLREDUCE_USE_SYMM_MEM_TOKEN_THRESHOLD": "1024"}}]},  # a count
    {"inference-platform:models": [{"env": {"HF_HUB_ENABLE_HF_TRANSFER": "1", "API_KEY_HEADER": "true"}}]},
    {"inference-platform:models": [{"env": {"HF_ENDPOINT": "https://hf-mirror.internal.example.com"}}]},
    {"inference-platform:observability": {"runbook_url": "https://github.com/acme/infra/blob/main/docs/runbook.md?plain=1"}},
    {"inference-platform:models": [{"extra_args": ["--max-num-batched-tokens", "8192", "--tokenizer", "Qwen/Qwen3-8B"]}]},
    {"kubernetes:context": "do-nyc1-prod", "pulumi:tags": {"team": "ml"}},
    {"inference-platform:api_keys": {"ci": {"secure": "v1:abc"}}},
])
def test_what_is_not_a_credential_passes(values):
    assert credential_problems(values, skip={"inference-platform:api_keys"}) == []


@pytest.mark.parametrize(("values", "path"), [
    ({"inference-platform:observability": {"alert_receiver": {"channel": "https://hooks.slack.com/services/T1/B2/abcdefgh"}}},
     "inference-platform:observability.alert_receiver.channel"),
    ({"inference-platform:observability": {"runbook_url": "https://wiki.example.com/r?token=abcdef"}}, "inference-platform:observability.runbook_url"),
    ({"kubernetes:kubeconfig": "apiVersion: v1"}, "kubernetes:kubeconfig"),
    ({"inference-platform:models": [{"env": {"DB_PASSWORD": "hunter2"}}]}, "inference-platform:models[0].env.DB_PASSWORD"),
    ({"inference-platform:models": [{"rollout": {"candidate": {"extra_args": ["--api-key=abc"]}}}]},
     "inference-platform:models[0].rollout.candidate.extra_args[0]"),
    ({"inference-platform:models": [{"env": {"MODEL_URL": "https://bucket.example.com/m?X-Amz-Signature=abcdef"}}]},
     "inference-platform:models[0].env.MODEL_URL"),
    ({"inference-platform:models": [{"env": {"JWT": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXNpZ24"}}]},
     "inference-platform:models[0].env.JWT"),
])
def test_a_credential_anywhere_is_refused_at_its_key(values, path):
    problems = credential_problems(values)
    assert [p.path for p in problems] == [path]
    assert all(v not in problems[0].message for v in ("abcdef", "hunter2", "abc", "eyJ"))  # never the value
