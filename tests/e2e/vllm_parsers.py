"""Print the option strings of the installed vLLM's `vllm serve` and `vllm bench serve` parsers.

Run with the ENGINE venv's Python: `<engine-python> tests/e2e/vllm_parsers.py` → JSON on stdout.
The real parsers of the installed build (here the CPU build), to check rendered flags against.
"""

import json

from vllm.benchmarks.serve import add_cli_args
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser


def options(parser) -> list[str]:
    return sorted({s for action in parser._actions for s in action.option_strings})


bench = FlexibleArgumentParser()
add_cli_args(bench)
print(json.dumps({"serve": options(make_arg_parser(FlexibleArgumentParser())), "bench_serve": options(bench)}))
