"""The ``openab-voice`` argument parser: every subcommand, its options and the function it runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from openab_voice.cli import commands
from openab_voice.cli.bench import BENCHES, cmd_bench

DESCRIPTION = "The ``openab-voice`` command."


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openab-voice", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_commands(sub)
    _add_bench(sub)
    return parser


def _add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Every subcommand but ``bench``."""
    p = sub.add_parser("run", help="run the bot on real Discord (DISCORD_TOKEN or DISCORD_TOKEN_FILE)")
    p.set_defaults(func=commands.cmd_run)

    p = sub.add_parser("demo", help="run the bot against the loopback Discord emulator")
    p.add_argument("--scenario", type=Path, default=None, help="scenario JSON (default: the bundled one)")
    p.add_argument(
        "--report", type=Path, default=None, help="write a JSON report here, and its HTML page beside it"
    )
    p.add_argument(
        "--record", type=Path, default=None, help="write DIR/<speaker id>.wav of what the bot heard"
    )
    p.add_argument(
        "--engine",
        choices=("cascade", "realtime", "live"),
        default=None,
        help=(
            "voice engine (default: OPENAB_ENGINE); realtime runs on the loopback realtime server, "
            "live on the loopback GPT-Live server"
        ),
    )
    p.set_defaults(func=commands.cmd_demo)

    p = sub.add_parser("check-config", help="validate settings and print the non-secret ones")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=commands.cmd_check_config)

    p = sub.add_parser("db", help="job store maintenance")
    p.add_argument("action", choices=["upgrade"], help="upgrade: apply the Alembic migrations")
    p.set_defaults(func=commands.cmd_db)

    p = sub.add_parser("memory", help="long-term memory maintenance")
    p.add_argument(
        "action", choices=["rebuild"], help="rebuild: re-embed every verified record, rewrite the vector file"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=commands.cmd_memory)

    p = sub.add_parser(
        "executor",
        help="run actions claimed from the PostgreSQL job store (a worker; drains on SIGTERM)",
    )
    p.add_argument(
        "--health", action="store_true", help="exit 0 if a worker of this node (OPENAB_NODE_ID) heartbeats"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=commands.cmd_executor)

    p = sub.add_parser("self-test", help="run checks on the real local providers")
    p.add_argument("target", choices=["audio", "agent"])
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=commands.cmd_self_test)


def _add_bench(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``bench NAME``: the options of every benchmark (each help line names the ones it is for)."""
    p = sub.add_parser("bench", help="benchmarks printing JSON")
    p.add_argument("name", choices=sorted(BENCHES))
    p.add_argument("--json", action="store_true")
    p.add_argument("--packets", type=int, default=20_000, help="receive: packets to process")
    p.add_argument("--speakers", type=int, default=10, help="receive / frontend / transcribe: speakers")
    p.add_argument(
        "--load", type=_non_negative, default=0, help="busy-loop processes beside the run (each takes a core)"
    )
    p.add_argument(
        "--loss", type=float, default=None, help="transcribe / soak: packet loss probability (0.01 / 0.02)"
    )
    p.add_argument("--seed", type=int, default=0, help="transcribe / soak: emulator seed")
    _add_soak_options(p)
    p.add_argument("--no-dave", action="store_true", help="receive: transport encryption only")
    p.add_argument("--seconds", type=float, default=10.0, help="frontend: seconds of audio per speaker")
    p.add_argument("--utterances", type=int, default=5, help="stt: utterances to transcribe")
    p.add_argument(
        "--language",
        choices=("en", "zh"),
        default="en",
        help="stt: zh compares Chinese (Whisper base) with English (tiny.en, base) in one run, by CER",
    )
    p.add_argument("--rounds", type=int, default=1, help="stt --language zh: times each clip is said")
    p.add_argument("--trials", type=int, default=5, help="dialogue / actions: trials; tts: rounds")
    p.add_argument("--records", type=int, default=100_000, help="memory: records stored")
    p.add_argument("--hours", type=float, default=2.0, help="transcript: length of the session")
    p.add_argument("--transitions", type=int, default=2000, help="actions: store transitions to time")
    _add_executor_options(p)
    _add_dialogue_options(p)
    p.set_defaults(func=cmd_bench)


def _add_soak_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--minutes", type=float, default=30.0, help="soak: how long the call lasts")
    p.add_argument("--sample-s", type=float, default=60.0, help="soak: seconds between samples")
    p.add_argument(
        "--warmup-minutes",
        type=float,
        default=5.0,
        help="soak: RSS growth is measured after this (or half the run)",
    )
    p.add_argument(
        "--resume",
        choices=("4015", "4006", "move", "none"),
        default="4015",
        help="soak: the forced voice event (close 4015 / 4006, a voice server move, or none)",
    )
    p.add_argument("--resume-every-s", type=float, default=300.0, help="soak: seconds between forced events")
    p.add_argument(
        "--churn-every-s", type=float, default=60.0, help="soak: a member joins and leaves this often"
    )
    p.add_argument("--jitter-ms", type=float, default=20.0, help="soak: per-packet jitter")
    p.add_argument(
        "--silence-s",
        type=float,
        default=300.0,
        help="soak: a silent phase after the call (nobody speaks, the bot plays nothing), then one question; 0: none",
    )
    p.add_argument(
        "--nat-timeout-s",
        type=float,
        default=30.0,
        help="soak: the emulator's NAT forgets the bot after this much UDP silence from it; 0: no NAT",
    )
    p.add_argument("--out", type=Path, default=None, help="soak: also write the JSON here after every sample")


def _add_executor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", default="1,2,4", help="executor: worker counts to measure, comma-separated")
    p.add_argument("--jobs", type=int, default=200, help="executor: jobs confirmed at once per worker count")
    p.add_argument(
        "--latency-jobs", type=int, default=10, help="executor: jobs confirmed one at a time to idle workers"
    )
    p.add_argument("--poll-s", type=float, default=0.1, help="executor: the workers' OPENAB_EXECUTOR_POLL_S")
    p.add_argument(
        "--mode",
        dest="executor_mode",
        choices=("process", "pod"),
        default="process",
        help="executor: pod also measures dispatchers of action pods on the KUBECONFIG cluster, beside in-process",
    )
    p.add_argument(
        "--pod-image", default="openab-voice:local", help="executor --mode pod: the action pods' image"
    )
    p.add_argument("--pod-namespace", default=None, help="executor --mode pod: the action pods' namespace")
    p.add_argument(
        "--cancels", type=int, default=10, help="executor: running jobs cancelled through the store"
    )
    p.add_argument(
        "--postgres-url",
        default=None,
        help="actions / executor: a PostgreSQL SQLAlchemy URL (default: a throwaway local cluster when PostgreSQL is installed)",
    )


def _add_dialogue_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ttft-ms",
        type=float,
        default=0.0,
        help="dialogue: the fake LLM's time to first token (counted in eou_to_first_audio_ms)",
    )
    p.add_argument(
        "--no-preemptive", action="store_true", help="dialogue: preemptive generation off (to compare)"
    )
    p.add_argument(
        "--end-of-turn",
        choices=("silence", "semantic"),
        default="silence",
        help="dialogue: how a turn ends (silence: the VAD alone, the default; semantic: Smart Turn and the words)",
    )
    p.add_argument(
        "--engine",
        choices=("cascade", "realtime", "live"),
        default="cascade",
        help="dialogue: the voice engine (realtime / live: on the loopback realtime / GPT-Live server)",
    )
    p.add_argument(
        "--first-audio-ms",
        type=float,
        default=300.0,
        help="dialogue --engine realtime|live: the server's first audio no earlier than this after a request",
    )
