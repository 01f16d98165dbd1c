"""Pack entry point: `pulumi preview --policy-pack policy` runs this file.

Constructing `PolicyPack` starts the analyzer's gRPC server and blocks, so nothing else lives here.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `rules` and `pack` next to this file

from pack import PACK_NAME, build_policies  # noqa: E402
from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

PolicyPack(
    name=PACK_NAME,
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=build_policies(),
)
