"""``openab-voice bench NAME``: each benchmark's runner from the parsed arguments, and the command
that runs one under the requested CPU load and prints its result."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from openab_voice.cli.output import print_json


def _bench_receive(args: argparse.Namespace) -> dict[str, Any]:
    from openab_voice.bench.receive import run

    return run(packets=args.packets, speakers=args.speakers, dave=not args.no_dave)


def _bench_frontend(args: argparse.Namespace) -> dict[str, Any]:
    from openab_voice.app import frontend_settings
    from openab_voice.bench.frontend import run
    from openab_voice.config import load_settings

    return run(seconds=args.seconds, speakers=args.speakers, settings=frontend_settings(load_settings()))


def _bench_stt(args: argparse.Namespace) -> dict[str, Any]:
    if args.language == "zh":
        from openab_voice.bench.stt_languages import run as run_languages

        return run_languages(rounds=args.rounds)
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
        load=args.load,
        end_of_turn=args.end_of_turn,
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


def _bench_tts(args: argparse.Namespace) -> dict[str, Any]:
    from openab_voice.bench.tts import run

    return run(rounds=args.trials, load=args.load)


def _bench_turns(args: argparse.Namespace) -> dict[str, Any]:
    from openab_voice.bench.turns import run

    return run()


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
    "tts": _bench_tts,
    "turns": _bench_turns,
}


def cmd_bench(args: argparse.Namespace) -> int:
    from openab_voice.bench.load import BusyLoad

    # The busy loops start before the benchmark's own set-up and stop however it ends.
    with BusyLoad(args.load):
        result = BENCHES[args.name](args)
    result["load"] = args.load
    if args.json:
        print_json(result)
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0
