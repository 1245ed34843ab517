"""The ``openab-voice`` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openab_voice.errors import AcpError, ConfigError, OpenabError

EXIT_FAILED = 1
EXIT_CONFIG = 2


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False, default=str))


def _cmd_check_config(args: argparse.Namespace) -> int:
    from openab_voice.config import config_warnings, load_settings, public_view

    settings = load_settings()
    view = public_view(settings)
    warnings = config_warnings(settings)  # printed, never fatal
    error = _check_realtime(settings) if settings.engine == "realtime" and settings.dialogue_enabled else None
    containment = None
    if settings.actions_enabled:
        from openab_voice.app.actions import containment_for

        containment = containment_for(settings)
        if error is None and containment.refusal is not None:
            # Fail closed, and say so before a user finds out from a refused proposal.
            error = AcpError(containment.refusal, code="ACP_CONTAINMENT_UNAVAILABLE")
    if args.json:
        out: dict[str, Any] = {"ok": error is None, "settings": view}
        if containment is not None:
            out["containment"] = {"mode": containment.mode.value, "detail": containment.describe()}
        if warnings:
            out["warnings"] = [warning.to_dict() for warning in warnings]
        if error is not None:
            out["error"] = error.to_dict()
        _print_json(out)
    else:
        width = max(len(k) for k in view)
        for key, value in view.items():
            print(f"{key:<{width}}  {value}")
        if containment is not None:
            print(f"{'containment':<{width}}  {containment.describe()}")
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        if error is not None:
            print(f"error: {error}", file=sys.stderr)
    return EXIT_FAILED if error is not None else 0


def _check_realtime(settings: Any) -> OpenabError | None:
    """Open one realtime session (the key and the model are only known good once the server says so)."""
    from openab_voice.providers.realtime_openai import OpenAIRealtime, probe, realtime_config

    async def check() -> OpenabError | None:
        connector = OpenAIRealtime(realtime_config(settings))
        try:
            await probe(connector)
        except OpenabError as exc:
            return exc
        finally:
            await connector.aclose()
        return None

    return asyncio.run(check())


def _cmd_run(args: argparse.Namespace) -> int:
    from openab_voice.app import run_bot
    from openab_voice.bus import EventBus
    from openab_voice.config import load_settings
    from openab_voice.report.terminal import TerminalReporter

    settings = load_settings()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    bus = EventBus()
    reporter = TerminalReporter(bus)
    try:
        asyncio.run(run_bot(settings, bus=bus))
    finally:
        reporter.close()
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from openab_voice.config import load_settings
    from openab_voice.demo.runner import run_demo
    from openab_voice.demo.scenario import load_scenario

    settings = load_settings()
    if args.engine is not None:
        settings = settings.model_copy(update={"engine": args.engine})
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    scenario = load_scenario(args.scenario)
    if args.report:
        from openab_voice.report.page import html_path_for, require_renderer, write_html

        require_renderer()  # a missing `report` extra fails now, not after the whole demo ran
    report = asyncio.run(run_demo(scenario, settings=settings, record_dir=args.record))
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        page = write_html(report, html_path_for(args.report), bot_name=scenario.bot_name)
        print(f"report: {args.report} and {page}")
    print(json.dumps(report["speakers"], indent=2))
    return 0


def _cmd_db(args: argparse.Namespace) -> int:
    from openab_voice.config import load_settings
    from openab_voice.store.database import resolve_url, upgrade

    head = upgrade(resolve_url(load_settings()))
    print(f"database at revision {head}")
    return 0


def _cmd_memory(args: argparse.Namespace) -> int:
    from openab_voice.app.records import rebuild_memory
    from openab_voice.config import load_settings

    health = rebuild_memory(load_settings())
    result = {"ok": health.ok, "code": health.code, "reason": health.reason, "records": health.records}
    if args.json:
        _print_json(result)
    else:
        print(f"memory: {health.reason}" + ("" if health.ok else f" ({health.code})"))
    return 0 if health.ok else EXIT_FAILED


def _cmd_executor(args: argparse.Namespace) -> int:
    from openab_voice.app.worker import run_worker, worker_health
    from openab_voice.bus import EventBus
    from openab_voice.clock import SystemClock
    from openab_voice.config import load_settings

    settings = load_settings()
    if args.health:
        health = worker_health(settings, clock=SystemClock())
        if args.json:
            _print_json(health)
        else:
            print("healthy" if health["ok"] else f"unhealthy: {health.get('reason', '')}")
        return 0 if health["ok"] else EXIT_FAILED
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    worker = asyncio.run(run_worker(settings, clock=SystemClock(), bus=EventBus()))
    print(f"executor {worker.owner} drained after {worker.claimed} job(s)")
    return 0


def _cmd_self_test(args: argparse.Namespace) -> int:
    result: dict[str, Any]
    if args.target == "audio":
        from openab_voice.app import frontend_settings
        from openab_voice.config import load_settings
        from openab_voice.diagnostics.audio import run_audio_self_test

        # The configured providers are the ones tested: a disabled or missing one fails the check.
        result = run_audio_self_test(frontend_settings(load_settings()))
    else:
        from openab_voice.diagnostics.agent import run_agent_self_test

        result = run_agent_self_test()
    if args.json:
        _print_json(result)
    else:
        checks = list(result.get("checks", []))
        for turn in result.get("turns", []):
            checks += [{**c, "name": f"{turn.get('name')}: {c.get('name')}"} for c in turn.get("checks", [])]
        for check in checks:
            mark = "PASS" if check.get("passed") else "FAIL"
            print(f"{mark}  {check.get('name')}: {check.get('detail', '')}")
        print("passed" if result.get("passed") else "FAILED")
    return 0 if result.get("passed") is True else EXIT_FAILED


def _bench_receive(args: argparse.Namespace) -> dict[str, Any]:
    from openab_voice.bench.receive import run

    return run(packets=args.packets, speakers=args.speakers, dave=not args.no_dave)


def _bench_frontend(args: argparse.Namespace) -> dict[str, Any]:
    from openab_voice.app import frontend_settings
    from openab_voice.bench.frontend import run
    from openab_voice.config import load_settings

    return run(seconds=args.seconds, speakers=args.speakers, settings=frontend_settings(load_settings()))


def _bench_stt(args: argparse.Namespace) -> dict[str, Any]:
    from openab_voice.bench.stt import run

    return run(utterances=args.utterances)


def _bench_actions(args: argparse.Namespace) -> dict[str, Any]:
    from openab_voice.bench.actions import run

    return run(trials=args.trials, transitions=args.transitions, postgres_url=args.postgres_url)


def _bench_executor(args: argparse.Namespace) -> dict[str, Any]:
    from openab_voice.bench.executor import run

    return run(
        workers=tuple(int(n) for n in args.workers.split(",")),
        jobs=args.jobs,
        latency_jobs=args.latency_jobs,
        poll_s=args.poll_s,
        cancels=args.cancels,
        postgres_url=args.postgres_url,
        mode=args.executor_mode,
        pod_image=args.pod_image,
        pod_namespace=args.pod_namespace,
    )


def _bench_dialogue(args: argparse.Namespace) -> dict[str, Any]:
    from openab_voice.bench.dialogue import run

    return run(
        trials=args.trials,
        ttft_ms=args.ttft_ms,
        preemptive=not args.no_preemptive,
        engine=args.engine,
        first_audio_latency_ms=args.first_audio_ms,
    )


def _bench_transcribe(args: argparse.Namespace) -> dict[str, Any]:
    from openab_voice.bench.transcribe import run

    return run(speakers=args.speakers, loss=0.01 if args.loss is None else args.loss, seed=args.seed)


def _bench_soak(args: argparse.Namespace) -> dict[str, Any]:
    from openab_voice.bench.soak import run

    return run(
        minutes=args.minutes,
        sample_s=args.sample_s,
        warmup_minutes=args.warmup_minutes,
        resume=args.resume,
        resume_every_s=args.resume_every_s,
        churn_every_s=args.churn_every_s,
        loss=0.02 if args.loss is None else args.loss,
        jitter_ms=args.jitter_ms,
        seed=args.seed,
        silence_s=args.silence_s,
        nat_timeout_s=args.nat_timeout_s if args.nat_timeout_s > 0 else None,
        out=args.out,
    )


def _bench_memory(args: argparse.Namespace) -> dict[str, Any]:
    from openab_voice.bench.memory import run

    return run(records=args.records)


def _bench_transcript(args: argparse.Namespace) -> dict[str, Any]:
    from openab_voice.bench.transcript import run

    return run(speakers=args.speakers, hours=args.hours)


BENCHES: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "actions": _bench_actions,
    "dialogue": _bench_dialogue,
    "executor": _bench_executor,
    "receive": _bench_receive,
    "frontend": _bench_frontend,
    "memory": _bench_memory,
    "soak": _bench_soak,
    "stt": _bench_stt,
    "transcribe": _bench_transcribe,
    "transcript": _bench_transcript,
}


def _cmd_bench(args: argparse.Namespace) -> int:
    from openab_voice.bench.load import BusyLoad

    # The busy loops start before the benchmark's own set-up and stop however it ends.
    with BusyLoad(args.load):
        result = BENCHES[args.name](args)
    result["load"] = args.load
    if args.json:
        _print_json(result)
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openab-voice", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run the bot on real Discord (DISCORD_TOKEN or DISCORD_TOKEN_FILE)")
    p.set_defaults(func=_cmd_run)

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
        choices=("cascade", "realtime"),
        default=None,
        help="voice engine (default: OPENAB_ENGINE); realtime runs on the loopback realtime server",
    )
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("check-config", help="validate settings and print the non-secret ones")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_check_config)

    p = sub.add_parser("db", help="job store maintenance")
    p.add_argument("action", choices=["upgrade"], help="upgrade: apply the Alembic migrations")
    p.set_defaults(func=_cmd_db)

    p = sub.add_parser("memory", help="long-term memory maintenance")
    p.add_argument(
        "action", choices=["rebuild"], help="rebuild: re-embed every verified record, rewrite the vector file"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_memory)

    p = sub.add_parser(
        "executor",
        help="run actions claimed from the PostgreSQL job store (a worker; drains on SIGTERM)",
    )
    p.add_argument(
        "--health", action="store_true", help="exit 0 if a worker of this node (OPENAB_NODE_ID) heartbeats"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_executor)

    p = sub.add_parser("self-test", help="run checks on the real local providers")
    p.add_argument("target", choices=["audio", "agent"])
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_self_test)

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
    p.add_argument("--no-dave", action="store_true", help="receive: transport encryption only")
    p.add_argument("--seconds", type=float, default=10.0, help="frontend: seconds of audio per speaker")
    p.add_argument("--utterances", type=int, default=5, help="stt: utterances to transcribe")
    p.add_argument("--trials", type=int, default=5, help="dialogue / actions: trials")
    p.add_argument("--records", type=int, default=100_000, help="memory: records stored")
    p.add_argument("--hours", type=float, default=2.0, help="transcript: length of the session")
    p.add_argument("--transitions", type=int, default=2000, help="actions: store transitions to time")
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
        "--engine",
        choices=("cascade", "realtime"),
        default="cascade",
        help="dialogue: the voice engine (realtime: on the loopback realtime server)",
    )
    p.add_argument(
        "--first-audio-ms",
        type=float,
        default=300.0,
        help="dialogue --engine realtime: the server's first audio no earlier than this after a request",
    )
    p.set_defaults(func=_cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except OpenabError as exc:
        if getattr(args, "json", False):
            _print_json({"ok": False, "error": exc.to_dict()})
        else:
            print(f"openab-voice: {exc}", file=sys.stderr)
        return EXIT_CONFIG if isinstance(exc, ConfigError) else EXIT_FAILED
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
