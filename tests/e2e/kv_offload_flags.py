"""Parse the rendered `vllm serve` args with the installed vLLM's own parser and print the offload
settings it derives (run with the ENGINE venv's Python; args as JSON on argv[1])."""

import json
import sys

from vllm.engine.arg_utils import EngineArgs
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser

args = make_arg_parser(FlexibleArgumentParser()).parse_args(json.loads(sys.argv[1]))
engine = EngineArgs.from_cli_args(args)
print(json.dumps({"kv_offloading_backend": engine.kv_offloading_backend, "kv_offloading_size": engine.kv_offloading_size,
                  "enable_prefix_caching": engine.enable_prefix_caching}))
