"""The ``openab-voice`` command: :func:`main` (the console entry point) parses the arguments
(:mod:`~openab_voice.cli.parser`), runs the command (:mod:`~openab_voice.cli.commands`,
:mod:`~openab_voice.cli.bench`) and maps an error to the exit code (:mod:`~openab_voice.cli.output`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from openab_voice.cli.bench import BENCHES
from openab_voice.cli.output import EXIT_CONFIG, EXIT_FAILED, print_json
from openab_voice.cli.parser import build_parser
from openab_voice.errors import ConfigError, OpenabError

__all__ = ["BENCHES", "EXIT_CONFIG", "EXIT_FAILED", "build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except OpenabError as exc:
        if getattr(args, "json", False):
            print_json({"ok": False, "error": exc.to_dict()})
        else:
            print(f"openab-voice: {exc}", file=sys.stderr)
        return EXIT_CONFIG if isinstance(exc, ConfigError) else EXIT_FAILED
    except KeyboardInterrupt:
        return 130
