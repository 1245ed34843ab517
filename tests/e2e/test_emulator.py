"""The loopback emulator against an unmodified discord.py 2.7.1 client (plain ``discord.Client``)."""

from __future__ import annotations

import asyncio
import io
import json
import struct
import threading
import wave
from pathlib import Path
from typing import Any

import aiohttp
import davey
import discord
import numpy as np
import pytest
from discord import app_commands
from discord.opus import Decoder

from openab_voice.clock import FakeClock
from openab_voice.discord.wire.rtp import OPUS_SILENCE, is_rtcp
from openab_voice.discord.wire.transport import cipher_for, open_packet
from openab_voice.errors import EmulatorError
from openab_voice.testing.emulator import (
    DiscordEmulator,
    EmulatorConfig,
    Impairments,
    UnknownHostError,
    build_client,
    load_wav_48k_stereo,
    running_client,
)
from openab_voice.testing.emulator.impairments import ImpairmentPlanner
from tests.e2e.conftest import ClientFactory
from tests.fakes import waiting

pytestmark = pytest.mark.e2e

RATE = 48_000
ALICE, BOB, CAROL = 1001, 1002, 1003
DAVE_ON = EmulatorConfig(dave=True, seed=5)


def tone(freq: float, seconds: float, amplitude: float = 0.3) -> bytes:
    t = np.arange(int(RATE * seconds)) / RATE
    mono = (amplitude * 32767 * np.sin(2 * np.pi * freq * t)).astype("<i2")
    return np.repeat(mono[:, None], 2, axis=1).tobytes()


def dominant_hz(pcm: bytes) -> float:
    left = np.frombuffer(pcm, dtype="<i2").reshape(-1, 2)[:, 0].astype(float)
    spectrum = np.abs(np.fft.rfft(left))
    return float(np.fft.rfftfreq(len(left), 1 / RATE)[spectrum.argmax()])


async def until(predicate: Any, what: str, timeout: float = 5.0) -> None:  # noqa: ASYNC109
    """Poll state that discord.py's threads or the emulator update without an awaitable to wait on."""
    await waiting.until(predicate, what, within_s=timeout)


# --- login, guild, REST errors -------------------------------------------------------------------


async def test_login_ready_guild_and_bad_token(
    emulator: DiscordEmulator, discord_client: ClientFactory
) -> None:
    emulator.add_user(ALICE, "alice")
    emulator.add_user(BOB, "bob", in_voice=False)
    readies: list[int] = []
    client: discord.Client = discord_client()

    @client.event
    async def on_ready() -> None:
        readies.append(len(client.guilds))

    async with running_client(emulator, client):
        assert readies == [1]
        assert client.user is not None and client.user.id == emulator.bot_user_id
        assert client.application_id == emulator.application_id
        guild = client.get_guild(emulator.guild_id)
        assert guild is not None
        assert isinstance(guild.get_channel(emulator.text_channel_id), discord.TextChannel)
        voice = guild.get_channel(emulator.voice_channel_id)
        assert isinstance(voice, discord.VoiceChannel)
        assert {m.id for m in voice.members} == {ALICE}
        assert guild.member_count == 3  # without the members intent only voice members are cached

    with pytest.raises(discord.LoginFailure):
        bad = discord_client()
        async with running_client(emulator, bad, token="not-the-token"):
            pass


async def test_only_discord_hosts_resolve_and_bad_requests_get_json_errors(emulator: DiscordEmulator) -> None:
    async with aiohttp.ClientSession(connector=emulator.client_connector()) as http:
        with pytest.raises(aiohttp.ClientConnectorError) as caught:
            await http.get("https://example.com/")
        assert isinstance(caught.value.os_error, UnknownHostError)

        api = "https://discord.com/api/v10"
        auth = {"Authorization": f"Bot {emulator.token}"}
        channel = f"{api}/channels/{emulator.text_channel_id}/messages"
        cases = [
            ("GET", f"{api}/users/@me", {"Authorization": "Bot nope"}, None, 401, 0),
            ("POST", channel, {**auth, "Content-Type": "application/json"}, b"{not json", 400, 50109),
            ("POST", channel, auth, b'{"content": 5}', 400, 50035),
            ("POST", channel, auth, b"{}", 400, 50006),
            ("POST", f"{api}/channels/1/messages", auth, b'{"content": "x"}', 404, 10003),
            ("GET", f"{channel}/123", auth, None, 404, 10008),
            ("GET", f"{api}/no/such/route", auth, None, 404, 0),
            ("POST", f"{api}/interactions/1/tok/callback", {}, b'{"type": 4}', 404, 10062),
            (
                "PUT",
                f"{api}/applications/{emulator.application_id}/commands",
                auth,
                b'[{"nope": 1}]',
                400,
                50035,
            ),
        ]
        for method, url, headers, body, status, code in cases:
            async with http.request(method, url, headers=headers, data=body) as resp:
                assert (resp.status, resp.headers["Content-Type"]) == (status, "application/json"), url
                error = json.loads(await resp.read())
                assert error["code"] == code and error["message"], (url, error)

        gateway = "wss://gateway.discord.gg/?v=10&encoding=json"
        voice = f"wss://127.0.0.1:{emulator.voice_port}/?v=8"
        voice_identify = {
            "server_id": str(emulator.guild_id),
            "user_id": "1",
            "session_id": "s",
            "token": "t",
        }
        frames = [
            (gateway, "{not json", 4002),
            (gateway, json.dumps({"op": 2, "d": {"token": "wrong", "intents": 0}}), 4004),
            (gateway, json.dumps({"op": 4, "d": {"guild_id": "1", "channel_id": None}}), 4003),
            (gateway, json.dumps({"op": 2, "d": {"token": 7}}), 4002),
            (voice, json.dumps({"op": 0, "d": voice_identify}), 4004),
            (voice, json.dumps({"op": 1, "d": {}}), 4003),
            (voice, "[]", 4002),
        ]
        for url, frame, close_code in frames:
            async with http.ws_connect(url) as ws:
                hello = await ws.receive_json()
                assert hello["op"] in (8, 10)
                await ws.send_str(frame)
                msg = await ws.receive()
                assert (msg.type, msg.data) == (aiohttp.WSMsgType.CLOSE, close_code), frame


@pytest.mark.parametrize(
    "emulator", [EmulatorConfig(dave=False, heartbeat_interval_ms=300, gateway_rtt_ms=40.0)], indirect=True
)
async def test_a_heartbeat_is_acked_a_round_trip_later(
    emulator: DiscordEmulator, discord_client: ClientFactory
) -> None:
    """An instant ACK on loopback can reach discord.py before its keep-alive thread stamps the beat
    as sent; it then logs "Can't keep up ... websocket is 41.3s behind" (seen in the demo). Whether
    that thread wakes first is up to the scheduler, so the check is on the emulator's side."""
    loop = asyncio.get_running_loop()
    gateway = "wss://gateway.discord.gg/?v=10&encoding=json"
    async with (
        aiohttp.ClientSession(connector=emulator.client_connector()) as http,
        http.ws_connect(gateway) as ws,
    ):
        hello = await ws.receive_json()
        assert hello["op"] == 10 and hello["d"]["heartbeat_interval"] == 300
        sent = loop.time()
        await ws.send_str(json.dumps({"op": 1, "d": None}))
        ack = await ws.receive_json()
        assert ack["op"] == 11 and loop.time() - sent >= 0.04
    with pytest.raises(EmulatorError):
        EmulatorConfig(heartbeat_interval_ms=10)
    client: discord.Client = discord_client()
    async with running_client(emulator, client):  # discord.py beats at the interval HELLO gave
        await until(lambda: client.latency < 10.0, "discord.py's first heartbeat ACK", timeout=2.0)


# --- slash commands --------------------------------------------------------------------------------


def command_tree(client: discord.Client, guild_id: int) -> app_commands.CommandTree[discord.Client]:
    """``/voice join``, ``/voice admin kick`` (guild commands) and a global ``/ping``."""
    tree = app_commands.CommandTree(client)
    voice = app_commands.Group(name="voice", description="voice control")
    admin = app_commands.Group(name="admin", description="admin tools", parent=voice)

    @voice.command(name="join", description="join a channel")
    async def join(interaction: discord.Interaction, channel: discord.VoiceChannel) -> None:
        await interaction.response.send_message(f"joining {channel.name} for {interaction.user.id}")

    @admin.command(name="kick", description="kick someone")
    async def kick(interaction: discord.Interaction, user: discord.Member, reason: str = "none") -> None:
        await interaction.response.defer(thinking=True)
        await interaction.followup.send(f"kicked {user.name}: {reason}")

    @app_commands.command(name="ping", description="ping")
    async def ping(interaction: discord.Interaction) -> None:
        await interaction.response.send_message("pong", ephemeral=True)
        await interaction.edit_original_response(content="pong!")

    tree.add_command(voice, guild=discord.Object(guild_id))
    tree.add_command(ping)
    return tree


async def test_command_sync_and_invocations(emulator: DiscordEmulator, discord_client: ClientFactory) -> None:
    emulator.add_user(ALICE, "alice")
    emulator.add_user(BOB, "bob")
    client: discord.Client = discord_client()
    tree = command_tree(client, emulator.guild_id)
    async with running_client(emulator, client):
        synced_global = await tree.sync()
        synced_guild = await tree.sync(guild=discord.Object(emulator.guild_id))
        assert [c.name for c in synced_global] == ["ping"] and [c.name for c in synced_guild] == ["voice"]
        assert sorted(c["name"] for c in emulator.registered_commands) == ["ping", "voice"]

        join = await emulator.invoke_command(
            ALICE, "voice", subcommand="join", options={"channel": emulator.voice_channel_id}
        )
        assert await join.response() == f"joining Voice for {ALICE}"
        assert join.callback_type == 4
        async with aiohttp.ClientSession(connector=emulator.client_connector()) as http:
            again = f"https://discord.com/api/v10/interactions/{join.id}/{join.token}/callback"
            async with http.post(again, json={"type": 4, "data": {"content": "again"}}) as resp:
                assert (resp.status, (await resp.json())["code"]) == (400, 40060)

        kick = await emulator.invoke_command(
            BOB, "voice", subcommand="admin kick", options={"user": ALICE, "reason": "spam"}
        )
        reply = await kick.reply()
        assert (reply.source, reply.callback_type, reply.content) == ("followup", 5, "kicked alice: spam")

        ping = await emulator.invoke_command(ALICE, "ping")
        first = await ping.reply()
        assert first.ephemeral and first.content == "pong"
        await until(lambda: len(ping.edits) == 1, "the @original edit")
        assert ping.edits[0]["content"] == "pong!"

        texts = [m["content"] for m in emulator.messages(emulator.text_channel_id)]
        assert texts == [f"joining Voice for {ALICE}", "kicked alice: spam"]  # ephemeral "pong" is not there

        with pytest.raises(EmulatorError):
            await emulator.invoke_command(ALICE, "voice", subcommand="leave")
        with pytest.raises(EmulatorError):
            await emulator.invoke_command(ALICE, "voice", subcommand="join")  # required option missing


# --- messages, buttons, pins ---------------------------------------------------------------------------


class ConfirmView(discord.ui.View):
    def __init__(self) -> None:
        super().__init__(timeout=None)
        self.clicked_by: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    @discord.ui.button(label="Confirm", style=discord.ButtonStyle.success, custom_id="confirm-1")
    async def confirm(self, interaction: discord.Interaction, button: discord.ui.Button[ConfirmView]) -> None:
        self.clicked_by.set_result(interaction.user.id)
        await interaction.response.edit_message(content="confirmed", view=None)


async def test_button_message_pin_and_click(emulator: DiscordEmulator, discord_client: ClientFactory) -> None:
    emulator.add_user(ALICE, "alice")
    client: discord.Client = discord_client()
    async with running_client(emulator, client):
        channel = client.get_channel(emulator.text_channel_id)
        assert isinstance(channel, discord.TextChannel)
        view = ConfirmView()
        message = await channel.send("Run the tests?", view=view)
        await message.pin()
        assert emulator.pins() == [message.id]
        assert [m.id async for m in channel.pins()] == [message.id]
        stored = emulator.messages()[0]
        assert stored["components"][0]["components"][0]["custom_id"] == "confirm-1"

        click = await emulator.click_button(ALICE, message.id, "confirm-1")
        assert await asyncio.wait_for(view.clicked_by, 5) == ALICE
        assert await click.response() == "confirmed"
        assert click.callback_type == 7
        assert emulator.messages()[0]["components"] == []
        with pytest.raises(EmulatorError):
            await emulator.click_button(ALICE, message.id, "confirm-1")  # the view was removed

        await message.unpin()
        assert emulator.pins() == []
        fetched = await channel.fetch_message(message.id)
        assert fetched.content == "confirmed"
        await fetched.delete()
        assert emulator.messages() == []


# --- voice ---------------------------------------------------------------------------------------------


class Capture:
    """A socket listener (called in discord.py's reader thread) that keeps every datagram."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._packets: list[bytes] = []

    def __call__(self, data: bytes) -> None:
        with self._lock:
            self._packets.append(bytes(data))

    def packets(self) -> list[bytes]:
        with self._lock:
            return list(self._packets)


def decode_speaker(
    vc: discord.VoiceClient, packets: list[bytes], ssrc: int, user_id: int
) -> tuple[bytes, int]:
    """Transport- (and DAVE-) decrypt and decode one SSRC's packets in sequence order."""
    cipher = cipher_for(vc.mode, bytes(vc.secret_key))
    frames: list[tuple[int, bytes]] = []
    for packet in packets:
        if len(packet) < 16 or is_rtcp(packet) or struct.unpack_from(">I", packet, 8)[0] != ssrc:
            continue
        header, payload = open_packet(cipher, packet)
        frames.append((header.sequence, payload))
    frames.sort()
    dave = vc._connection.dave_session
    decoder = Decoder()  # type: ignore[no-untyped-call]
    pcm = b""
    for _, payload in frames:
        if payload == OPUS_SILENCE:
            continue
        if dave is not None:
            payload = dave.decrypt(user_id, davey.MediaType.audio, payload)
        pcm += decoder.decode(payload, fec=False)
    return pcm, len(frames)


async def play(vc: discord.VoiceClient, pcm: bytes) -> None:
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    vc.play(discord.PCMAudio(io.BytesIO(pcm)), after=lambda _: loop.call_soon_threadsafe(done.set))
    await asyncio.wait_for(done.wait(), 10)


@pytest.mark.parametrize(
    "emulator", [EmulatorConfig(dave=False, seed=3), DAVE_ON], indirect=True, ids=["dave-off", "dave-on"]
)
async def test_voice_both_directions(emulator: DiscordEmulator, discord_client: ClientFactory) -> None:
    dave = emulator.config.dave
    emulator.add_user(ALICE, "alice")
    client: discord.Client = discord_client()
    async with running_client(emulator, client):
        channel = client.get_channel(emulator.voice_channel_id)
        assert isinstance(channel, discord.VoiceChannel)
        vc = await channel.connect(timeout=10, reconnect=False)
        info = await emulator.wait_voice_ready()
        assert info.dave_enabled is dave and info.mode == vc.mode == "aead_xchacha20_poly1305_rtpsize"
        assert info.bot_ssrc == vc.ssrc and bytes(vc.secret_key) == info.secret_key
        if dave:
            assert info.privacy_code and vc.voice_privacy_code == info.privacy_code
        else:
            assert info.privacy_code is None and vc._connection.dave_session is None

        # Bot -> emulator: one second of A440 through discord.py's own player.
        await play(vc, tone(440.0, 1.0))
        await until(lambda: emulator.bot_audio.silence_frames >= 5, "the end of playback")
        assert emulator.bot_audio.ms == pytest.approx(1000, abs=20)
        assert dominant_hz(emulator.bot_audio.pcm()) == pytest.approx(440, abs=3)
        assert emulator.bot_audio.decrypt_failures == 0

        # Emulator -> bot: a speaker already in the call, and one who joins mid-call.
        capture = Capture()
        vc._connection.add_socket_listener(capture)
        bob = emulator.add_user(BOB, "bob")
        alice_report, bob_report = await asyncio.gather(
            emulator.speaker(ALICE).say(tone(660.0, 0.4)),
            bob.say(tone(880.0, 0.3), send_before_speaking=3, loss=0.1, reorder=0.1, jitter_ms=15),
        )
        await until(lambda: len(capture.packets()) >= alice_report.sent + bob_report.sent, "the packets")
        vc._connection.remove_socket_listener(capture)
        assert alice_report.sent == alice_report.frames + 5 == 25 and alice_report.completed
        assert bob_report.dropped_by_impairment + bob_report.sent == bob_report.frames + 5
        alice_pcm, alice_count = decode_speaker(vc, capture.packets(), emulator.speaker(ALICE).ssrc, ALICE)
        bob_pcm, bob_count = decode_speaker(vc, capture.packets(), bob.ssrc, BOB)
        assert (alice_count, bob_count) == (alice_report.sent, bob_report.sent)
        assert dominant_hz(alice_pcm) == pytest.approx(660, abs=5)
        assert dominant_hz(bob_pcm) == pytest.approx(880, abs=5)

        # Leaving: the bot's cache drops the member; with DAVE the bot followed the MLS removal.
        await emulator.speaker(ALICE).leave()
        await until(lambda: ALICE not in {m.id for m in channel.members}, "the voice state update")
        if dave:
            assert sorted(vc._connection.dave_session.get_user_ids()) == sorted(
                str(u) for u in (BOB, emulator.bot_user_id, emulator.recorder_user_id)
            )
        await vc.disconnect()
        await until(lambda: emulator.voice_session() is None, "the voice session to end")


@pytest.mark.parametrize("emulator", [DAVE_ON], indirect=True)
async def test_bad_input_reaches_the_bot_socket(
    emulator: DiscordEmulator, discord_client: ClientFactory
) -> None:
    emulator.add_user(ALICE, "alice")
    client: discord.Client = discord_client()
    async with running_client(emulator, client):
        channel = client.get_channel(emulator.voice_channel_id)
        assert isinstance(channel, discord.VoiceChannel)
        vc = await channel.connect(timeout=10, reconnect=False)
        await emulator.wait_voice_ready()
        capture = Capture()
        vc._connection.add_socket_listener(capture)
        raw = [b"\x80\x78\x00\x01", b"\x81\xc9\x00\x07" + bytes(28), bytes(range(256)) * 6]
        for datagram in raw:
            await emulator.send_raw_udp(datagram)
        speaker = emulator.speaker(ALICE)
        wrong = await speaker.say_with_wrong_key(tone(500.0, 0.1))
        plain = await speaker.say_without_dave(tone(500.0, 0.1))
        unmapped = await emulator.send_unmapped_ssrc(4242, tone(500.0, 0.1))
        total = len(raw) + wrong.sent + plain.sent + unmapped.sent
        await until(lambda: len(capture.packets()) >= total, "the packets")
        vc._connection.remove_socket_listener(capture)
        packets = capture.packets()
        assert packets[: len(raw)] == raw
        cipher = cipher_for(vc.mode, bytes(vc.secret_key))
        ours = [p for p in packets[len(raw) :] if struct.unpack_from(">I", p, 8)[0] == speaker.ssrc]
        failures = 0
        for packet in ours[: wrong.sent]:
            try:
                open_packet(cipher, packet)
            except Exception:
                failures += 1
        assert failures == wrong.sent
        session = vc._connection.dave_session
        for packet in ours[wrong.sent :]:
            _, payload = open_packet(cipher, packet)
            if payload != OPUS_SILENCE:
                with pytest.raises(Exception):  # noqa: B017 (davey raises plain exceptions)
                    session.decrypt(ALICE, davey.MediaType.audio, payload)
        await vc.disconnect()


async def test_speaker_pacing_follows_the_injected_clock() -> None:
    clock = FakeClock()
    # No SPEAKING lead: the first packet goes out without the clock moving.
    async with DiscordEmulator(EmulatorConfig(dave=False, speaking_lead_ms=0.0), clock=clock) as emu:
        emu.add_user(ALICE, "alice")
        async with running_client(emu, build_client(emu)) as client:
            channel = client.get_channel(emu.voice_channel_id)
            assert isinstance(channel, discord.VoiceChannel)
            vc = await channel.connect(timeout=10, reconnect=False)
            await emu.wait_voice_ready()
            capture = Capture()
            vc._connection.add_socket_listener(capture)
            say = asyncio.create_task(emu.speaker(ALICE).say(tone(440.0, 0.1)))  # 5 frames + 5 silence
            await until(lambda: len(capture.packets()) == 1, "the first packet")
            for sent in range(2, 11):
                await asyncio.sleep(0.03)  # real time: it alone moves nothing, only the fake clock does
                assert len(capture.packets()) == sent - 1
                clock.advance(0.0201)  # just past the next 20 ms deadline
                await until(lambda n=sent: len(capture.packets()) == n, f"packet {sent}")
            report = await say
            assert (report.sent, report.completed) == (10, True)
            vc._connection.remove_socket_listener(capture)
            await vc.disconnect()


# --- offline helpers ---------------------------------------------------------------------------------


def test_impairments_are_seeded() -> None:
    imp = Impairments(loss=0.2, reorder=0.1, jitter_ms=5.0)
    first = [ImpairmentPlanner(imp, seed=9).next() for _ in range(3)]
    again = [ImpairmentPlanner(imp, seed=9).next() for _ in range(3)]
    assert first == again
    with pytest.raises(EmulatorError):
        Impairments(loss=1.5)
    with pytest.raises(EmulatorError):
        EmulatorConfig(modes=("xsalsa20_poly1305",))


def _write_wav(path: Path, samples: np.ndarray, rate: int, width: int, *, extensible: bool = False) -> None:
    channels = samples.shape[1]
    if width == 1:
        raw = (np.clip(samples, -1, 0.999) * 128 + 128).astype(np.uint8).tobytes()
    else:
        ints = (np.clip(samples, -1, 0.999) * (1 << (8 * width - 1))).astype(np.int64)
        raw = b"".join(int(v).to_bytes(width, "little", signed=True) for v in ints.reshape(-1))
    if not extensible:
        with wave.open(str(path), "wb") as out:
            out.setnchannels(channels)
            out.setsampwidth(width)
            out.setframerate(rate)
            out.writeframes(raw)
        return
    guid_pcm = struct.pack("<H", 1) + bytes.fromhex("000000001000800000aa00389b71")
    fmt = (
        struct.pack(
            "<HHIIHHHHI",
            0xFFFE,
            channels,
            rate,
            rate * channels * width,
            channels * width,
            8 * width,
            22,
            8 * width,
            3,
        )
        + guid_pcm
    )
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(raw)) + raw
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)


@pytest.mark.parametrize(
    ("rate", "channels", "width", "extensible"),
    [(22_050, 1, 1, False), (16_000, 1, 2, False), (44_100, 2, 3, True), (48_000, 4, 4, True)],
)
def test_load_wav_48k_stereo(tmp_path: Path, rate: int, channels: int, width: int, extensible: bool) -> None:
    t = np.arange(int(rate * 0.25)) / rate
    samples = np.repeat((0.5 * np.sin(2 * np.pi * 440 * t))[:, None], channels, axis=1)
    path = tmp_path / "in.wav"
    _write_wav(path, samples, rate, width, extensible=extensible)
    pcm = load_wav_48k_stereo(path)
    assert len(pcm) // 4 == pytest.approx(RATE * 0.25, abs=2)
    assert dominant_hz(pcm) == pytest.approx(440, abs=5)
    stereo = np.frombuffer(pcm, dtype="<i2").reshape(-1, 2)
    assert np.array_equal(stereo[:, 0], stereo[:, 1])
    with pytest.raises(EmulatorError):
        load_wav_48k_stereo(tmp_path / "missing.wav")
