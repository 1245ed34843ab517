"""How ``openab-voice`` commands report: JSON on stdout and the exit codes."""

from __future__ import annotations

import json
from typing import Any

EXIT_FAILED = 1
EXIT_CONFIG = 2


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False, default=str))
