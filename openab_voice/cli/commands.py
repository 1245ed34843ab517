"""The ``openab-voice`` commands but ``bench``: each takes the parsed arguments and returns the exit
code. Heavy imports stay inside each command, so ``--help`` and a config check start fast."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from openab_voice.cli.output import EXIT_FAILED, print_json
from openab_voice.errors import AcpError, ErrorCode, OpenabError


def cmd_check_config(args: argparse.Namespace) -> int:
    from openab_voice.config import config_warnings, load_settings, public_view

    settings = load_settings()
    view = public_view(settings)
    warnings = config_warnings(settings)  # printed, never fatal
    error = _check_engine(settings) if settings.dialogue_enabled else None
    containment = None
    if settings.actions_enabled:
        from openab_voice.app.actions import containment_for

        containment = containment_for(settings)
        if error is None and containment.refusal is not None:
            # Fail closed, and say so before a user finds out from a refused proposal.
            error = AcpError(containment.refusal, code=ErrorCode.ACP_CONTAINMENT_UNAVAILABLE)
    if args.json:
        out: dict[str, Any] = {"ok": error is None, "settings": view}
        if containment is not None:
            out["containment"] = {"mode": containment.mode.value, "detail": containment.describe()}
        if warnings:
            out["warnings"] = [warning.to_dict() for warning in warnings]
        if error is not None:
            out["error"] = error.to_dict()
        print_json(out)
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


def _check_engine(settings: Any) -> OpenabError | None:
    """Open one session of the speech-to-speech engine, realtime or live (the key and the model are
    only known good once the server says so); None for the cascade."""
    if settings.engine == "realtime":
        from openab_voice.providers.realtime_openai import OpenAIRealtime, probe, realtime_config

        return asyncio.run(_probe_once(OpenAIRealtime(realtime_config(settings)), probe))
    if settings.engine == "live":
        from openab_voice.app.providers import live_config
        from openab_voice.providers.live_openai import OpenAILive
        from openab_voice.providers.live_openai import probe as probe_live

        return asyncio.run(_probe_once(OpenAILive(live_config(settings)), probe_live))
    return None


async def _probe_once(connector: Any, probe: Callable[[Any], Awaitable[object]]) -> OpenabError | None:
    """``probe(connector)``'s refusal, or None; the connector is closed either way."""
    try:
        await probe(connector)
    except OpenabError as exc:
        return exc
    finally:
        await connector.aclose()
    return None


def cmd_run(args: argparse.Namespace) -> int:
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


def cmd_demo(args: argparse.Namespace) -> int:
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


def cmd_db(args: argparse.Namespace) -> int:
    from openab_voice.config import load_settings
    from openab_voice.store.database import resolve_url, upgrade

    head = upgrade(resolve_url(load_settings()))
    print(f"database at revision {head}")
    return 0


def cmd_memory(args: argparse.Namespace) -> int:
    from openab_voice.app.records import rebuild_memory
    from openab_voice.config import load_settings

    health = rebuild_memory(load_settings())
    result = {"ok": health.ok, "code": health.code, "reason": health.reason, "records": health.records}
    if args.json:
        print_json(result)
    else:
        print(f"memory: {health.reason}" + ("" if health.ok else f" ({health.code})"))
    return 0 if health.ok else EXIT_FAILED


def cmd_executor(args: argparse.Namespace) -> int:
    from openab_voice.app.worker import run_worker, worker_health
    from openab_voice.bus import EventBus
    from openab_voice.clock import SystemClock
    from openab_voice.config import load_settings

    settings = load_settings()
    if args.health:
        health = worker_health(settings, clock=SystemClock())
        if args.json:
            print_json(health)
        else:
            print("healthy" if health["ok"] else f"unhealthy: {health.get('reason', '')}")
        return 0 if health["ok"] else EXIT_FAILED
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    worker = asyncio.run(run_worker(settings, clock=SystemClock(), bus=EventBus()))
    print(f"executor {worker.owner} drained after {worker.claimed} job(s)")
    return 0


def cmd_self_test(args: argparse.Namespace) -> int:
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
        print_json(result)
    else:
        checks = list(result.get("checks", []))
        for turn in result.get("turns", []):
            checks += [{**c, "name": f"{turn.get('name')}: {c.get('name')}"} for c in turn.get("checks", [])]
        for check in checks:
            mark = "PASS" if check.get("passed") else "FAIL"
            print(f"{mark}  {check.get('name')}: {check.get('detail', '')}")
        print("passed" if result.get("passed") else "FAILED")
    return 0 if result.get("passed") is True else EXIT_FAILED
