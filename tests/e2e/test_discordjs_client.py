"""The emulator held against an independent client: discord.js 14 + @discordjs/voice 0.19 + davey.

``tests/discordjs/client.cjs`` (its packages pinned in ``tests/discordjs/package.json``, installed by
``scripts/setup.sh`` into ``.cache/discordjs-client``) logs in, joins the voice channel, records every
user's Opus after transport and DAVE decryption, and plays Opus it is handed. Each run: a user
already in the call and one who joins mid-call talk, the client plays a tone, the emulator forces a
4015 close, the client resumes (op 7 -> op 9) and a user talks again. Each recording must hold its
own user's tones and not the other's, and the emulator must have decoded the client's playback.
DAVE on and off, both transport modes (@discordjs/voice takes the first mode offered that it
supports).

Skipped, saying why, only where ``node`` is absent; with node but without the packages they fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from discord.opus import Decoder, Encoder

from openab_voice.testing.emulator import DiscordEmulator, EmulatorConfig
from tests.fakes.waiting import until

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CLIENT_JS = ROOT / "tests/discordjs/client.cjs"
NODE_MODULES = Path(os.environ.get("TEST_DISCORDJS_MODULES") or ROOT / ".cache/discordjs-client/node_modules")
NODE = shutil.which("node")
RATE = 48_000
ALICE, BOB = 2001, 2002
XCHACHA, AES_GCM = "aead_xchacha20_poly1305_rtpsize", "aead_aes256_gcm_rtpsize"


def tone(freq: float, seconds: float, amplitude: float = 0.3) -> bytes:
    t = np.arange(int(RATE * seconds)) / RATE
    mono = (amplitude * 32767 * np.sin(2 * np.pi * freq * t)).astype("<i2")
    return np.repeat(mono[:, None], 2, axis=1).tobytes()


def band_share(pcm: bytes, freq: float, width: float = 15.0) -> float:
    """The share of the spectrum's energy within ``width`` Hz of ``freq`` (0 for silence)."""
    left = np.frombuffer(pcm, dtype="<i2").reshape(-1, 2)[:, 0].astype(float)
    if not len(left):
        return 0.0
    power = np.abs(np.fft.rfft(left)) ** 2
    freqs = np.fft.rfftfreq(len(left), 1 / RATE)
    total = float(power.sum())
    return float(power[np.abs(freqs - freq) <= width].sum()) / total if total else 0.0


def opus_file(path: Path, pcm: bytes) -> Path:
    """``pcm`` as Opus packets, each prefixed with its length (>H), for the client to play."""
    encoder = Encoder()
    frame = 3840
    with path.open("wb") as out:
        for i in range(0, len(pcm), frame):
            packet = encoder.encode(pcm[i : i + frame].ljust(frame, b"\0"), 960)
            out.write(struct.pack(">H", len(packet)) + packet)
    return path


def decode_recording(path: Path) -> bytes:
    data = path.read_bytes()
    decoder = Decoder()  # type: ignore[no-untyped-call]
    pcm = bytearray()
    i = 0
    while i + 2 <= len(data):
        (n,) = struct.unpack_from(">H", data, i)
        packet = data[i + 2 : i + 2 + n]
        i += 2 + n
        if packet != b"\xf8\xff\xfe":
            pcm += decoder.decode(packet, fec=False)
    return bytes(pcm)


class NodeClient:
    """The discord.js client process: JSON lines out, JSON commands in."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self.events: list[dict[str, Any]] = []

    async def event(self, name: str, timeout: float = 30.0) -> dict[str, Any]:  # noqa: ASYNC109
        assert self._proc.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                line = await self._proc.stdout.readline()
                if not line:
                    stderr = b"" if self._proc.stderr is None else await self._proc.stderr.read()
                    pytest.fail(
                        f"the client exited waiting for {name}: {self.events[-3:]} {stderr[-2000:]!r}"
                    )
                event = json.loads(line)
                self.events.append(event)
                if event["event"] == "failed":
                    pytest.fail(f"the client failed: {event}")
                if event["event"] == name:
                    return event

    async def send(self, command: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps(command) + "\n").encode())
        await self._proc.stdin.drain()

    async def status_when(self, predicate: Any, what: str, timeout: float = 10.0) -> dict[str, Any]:  # noqa: ASYNC109
        """The client's status once ``predicate`` holds: what the emulator sent may still be on its
        way through the client's websocket when the emulator's side has returned."""
        async with asyncio.timeout(timeout):
            while True:
                await self.send({"cmd": "status"})
                status = await self.event("status")
                if predicate(status):
                    return status
                await asyncio.sleep(0.05)  # real time: the client's status is only ever asked for
        raise AssertionError(what)  # pragma: no cover - the timeout raises first


@contextlib.asynccontextmanager
async def node_client(emulator: DiscordEmulator, tmp: Path, *, dave: bool) -> AsyncIterator[NodeClient]:
    assert NODE is not None
    ca = tmp / "ca.pem"
    ca.write_bytes(emulator.ca_pem)
    out = tmp / "recordings"
    out.mkdir()
    config = {
        "token": emulator.token,
        "api": f"https://127.0.0.1:{emulator.api_port}/api",
        "guild_id": str(emulator.guild_id),
        "channel_id": str(emulator.voice_channel_id),
        "dave": dave,
        "out_dir": str(out),
    }
    (tmp / "config.json").write_text(json.dumps(config))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "NODE_PATH": str(NODE_MODULES),
        "NODE_EXTRA_CA_CERTS": str(ca),
    }
    proc = await asyncio.create_subprocess_exec(
        NODE,
        str(CLIENT_JS),
        str(tmp / "config.json"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp,
    )
    try:
        yield NodeClient(proc)
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await proc.wait()


@pytest.fixture
def node() -> str:
    if NODE is None:
        pytest.skip("node is not installed: the discord.js client cannot run")
    if not (NODE_MODULES / "@discordjs/voice/package.json").is_file():
        pytest.fail(
            f"{NODE_MODULES} lacks @discordjs/voice: run scripts/setup.sh (npm installs it)", pytrace=False
        )
    return NODE


@pytest.mark.parametrize(
    ("dave", "mode"),
    [(True, AES_GCM), (True, XCHACHA), (False, AES_GCM), (False, XCHACHA)],
    ids=["dave-aes", "dave-xchacha", "plain-aes", "plain-xchacha"],
)
async def test_discordjs_records_each_user_and_is_heard(
    node: str, tmp_path: Path, dave: bool, mode: str
) -> None:
    other = XCHACHA if mode == AES_GCM else AES_GCM
    config = EmulatorConfig(dave=dave, modes=(mode, other), seed=7, advertise_loopback=True)
    async with DiscordEmulator(config) as emulator:
        alice = emulator.add_user(ALICE, "alice")
        async with node_client(emulator, tmp_path, dave=dave) as client:
            ready = await client.event("voice_ready")
            info = await emulator.wait_voice_ready()
            assert ready["mode"] == info.mode == mode
            assert ready["ssrc"] == info.bot_ssrc
            if dave:
                assert ready["dave_version"] == 1 and ready["privacy_code"] == info.privacy_code
                # Every member of the group was announced (op 11), the hidden recorder included.
                assert set(ready["dave_users"]) <= {*ready["connected_clients"], str(emulator.bot_user_id)}
            else:
                assert ready["dave_version"] == 0 and info.privacy_code is None

            # A user already in the call, and one who joins mid-call, talk at once.
            bob = emulator.add_user(BOB, "bob")
            reports = await asyncio.gather(alice.say(tone(440.0, 0.6)), bob.say(tone(660.0, 0.6)))
            assert all(r.completed for r in reports)

            # The client plays; the emulator decodes it (DAVE-decrypted by the recorder).
            await client.send(
                {"cmd": "play", "file": str(opus_file(tmp_path / "play.opus", tone(880.0, 1.0)))}
            )
            played = await client.event("played")
            assert emulator.bot_audio.ms == pytest.approx(1000, abs=60)
            assert band_share(emulator.bot_audio.pcm(), 880.0) > 0.9
            assert emulator.bot_audio.decrypt_failures == emulator.bot_audio.decode_failures == 0
            if dave:
                assert played["privacy_code"] == emulator.voice_session().privacy_code  # type: ignore[union-attr]

            # The voice server "crashes": the client resumes the same session and keeps listening.
            await emulator.close_voice(4015)
            resumed = await emulator.wait_voice_resumed(timeout=20)
            assert resumed.bot_ssrc == info.bot_ssrc and resumed.secret_key == info.secret_key
            await client.event("resumed")
            assert (await alice.say(tone(520.0, 0.6))).completed

            await client.send({"cmd": "quit"})
            bye = await client.event("bye")

        stats = emulator.voice_stats()
        assert stats["closes"][0] == (4015, True) and stats["resumes"] == 1 and stats["failed_resumes"] == 0
        assert bye["resumed"] == 1 and bye["errors"] == [], bye
        recordings = bye["recordings"]
        assert set(recordings) >= {str(ALICE), str(BOB)}
        heard = {uid: decode_recording(Path(rec["file"])) for uid, rec in recordings.items()}
        alice_pcm, bob_pcm = heard[str(ALICE)], heard[str(BOB)]
        # Own tones dominate; the other user's is absent.
        assert band_share(alice_pcm, 440.0) + band_share(alice_pcm, 520.0) > 0.85
        assert min(band_share(alice_pcm, 440.0), band_share(alice_pcm, 520.0)) > 0.3  # before and after
        assert band_share(alice_pcm, 660.0) < 0.01
        assert band_share(bob_pcm, 660.0) > 0.85
        assert band_share(bob_pcm, 440.0) + band_share(bob_pcm, 520.0) < 0.01
        # Both of Alice's utterances arrived whole: before and after the resume.
        assert len(alice_pcm) >= 2 * 0.6 * RATE * 4 * 0.95
        assert len(bob_pcm) >= 0.6 * RATE * 4 * 0.95


CAROL = 2003


async def test_discordjs_dave_commits_recovery_replay_and_move(node: str, tmp_path: Path) -> None:
    """DAVE with the client's commits winning (op 28), an unprocessable commit reported with op 31
    (JSON) and healed by a re-join that replaces the client's leaf, a join whose op 11 and DAVE
    proposals are replayed after a 4015 RESUME, a downgrade to transport-only and an upgrade back,
    a voice server move, and a 4006 that ends the session (discord.js re-joins)."""
    config = EmulatorConfig(dave=True, seed=8, advertise_loopback=True, client_commits=True)
    async with DiscordEmulator(config) as emulator:
        alice = emulator.add_user(ALICE, "alice")
        async with node_client(emulator, tmp_path, dave=True) as client:
            await client.event("voice_ready")
            first = await emulator.wait_voice_ready()

            # Bob joins: discord.js commits the external Add and its commit wins.
            bob = emulator.add_user(BOB, "bob")
            assert (await bob.say(tone(660.0, 0.4))).completed
            assert emulator.voice_stats()["client_commits_won"] == 1

            # A commit it cannot process: op 31 as JSON, then a new key package; one leaf each.
            transition = await emulator.dave_send_invalid_commit()
            healed = await emulator.wait_dave_synced()
            assert transition in emulator.voice_stats()["invalid_reports"]
            assert healed.bot_ssrc == first.bot_ssrc and emulator.voice_stats()["closes"] == []
            status = await client.status_when(
                lambda st: st["privacy_code"] == healed.privacy_code, "the client in the healed group"
            )
            assert sorted(status["dave_users"]) == sorted(str(u) for u in emulator.dave_members())
            assert len(set(status["dave_users"])) == len(status["dave_users"])
            assert status["privacy_code"] == healed.privacy_code
            assert (await alice.say(tone(440.0, 0.4))).completed

            # 4015 while Carol joins: her op 11 and the DAVE proposals wait, then are replayed.
            await emulator.close_voice(4015)
            carol = emulator.add_user(CAROL, "carol")
            await emulator.wait_voice_resumed(timeout=20)
            assert (await carol.say(tone(770.0, 0.4))).completed
            assert emulator.voice_stats()["replayed"] >= 1

            # Down to transport-only and back (ops 21/22, then 24/26/30/23/22).
            await emulator.dave_downgrade()
            await client.status_when(lambda st: st["dave_version"] == 0, "the downgrade")
            assert (await bob.say(tone(600.0, 0.4))).completed
            upgraded = await emulator.dave_upgrade()
            await client.status_when(
                lambda st: st["dave_version"] == 1 and st["privacy_code"] == upgraded.privacy_code,
                "the upgrade",
            )
            assert (await bob.say(tone(680.0, 0.4))).completed

            # The call moves to the other voice server: a fresh identify there, new SSRC and group.
            emulator.move_voice_server()
            await until_new_session(emulator, first.bot_ssrc)
            moved = await emulator.wait_voice_ready(timeout=20)
            assert (await alice.say(tone(520.0, 0.4))).completed

            # 4006 ends the session: discord.js rejoins through the main gateway (op 4) and identifies.
            await emulator.close_voice(4006)
            await until_new_session(emulator, moved.bot_ssrc)
            rejoined = await emulator.wait_voice_ready(timeout=20)
            assert (await carol.say(tone(830.0, 0.4))).completed
            await client.send({"cmd": "quit"})
            bye = await client.event("bye")

        assert bye["errors"] == [], bye
        assert bye["ssrc"] == rejoined.bot_ssrc and bye["privacy_code"] == rejoined.privacy_code
        assert (4006, False) in emulator.voice_stats()["closes"]
        heard = {uid: decode_recording(Path(rec["file"])) for uid, rec in bye["recordings"].items()}
        alice_pcm, bob_pcm, carol_pcm = heard[str(ALICE)], heard[str(BOB)], heard[str(CAROL)]
        assert band_share(alice_pcm, 440.0) + band_share(alice_pcm, 520.0) > 0.85
        assert (
            min(band_share(alice_pcm, 440.0), band_share(alice_pcm, 520.0)) > 0.3
        )  # before and after the move
        bob_tones = [band_share(bob_pcm, f) for f in (660.0, 600.0, 680.0)]
        assert sum(bob_tones) > 0.85 and min(bob_tones) > 0.2  # with DAVE, without, with again
        assert band_share(carol_pcm, 770.0) + band_share(carol_pcm, 830.0) > 0.85
        assert min(band_share(carol_pcm, 770.0), band_share(carol_pcm, 830.0)) > 0.3
        assert band_share(alice_pcm, 660.0) + band_share(alice_pcm, 770.0) < 0.01
        assert band_share(carol_pcm, 440.0) + band_share(carol_pcm, 660.0) < 0.01


async def until_new_session(emulator: DiscordEmulator, old_ssrc: int, timeout: float = 20.0) -> None:  # noqa: ASYNC109
    def new() -> bool:
        session = emulator.voice_session()
        return session is not None and session.bot_ssrc != old_ssrc

    await until(new, f"a voice session other than SSRC {old_ssrc}", within_s=timeout, every_s=0.02)
