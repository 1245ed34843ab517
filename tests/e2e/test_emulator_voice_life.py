"""A voice session's life on the emulator, held against unmodified discord.py 2.7.1: forced closes and
RESUME, a voice server move, a UDP outage, DAVE op 31 recovery, and the bot's own commits winning."""

from __future__ import annotations

import logging
import struct
from typing import Any

import discord
import pytest

from openab_voice.testing.emulator import DiscordEmulator, EmulatorConfig, VoiceEvent, running_client
from tests.e2e.conftest import ClientFactory
from tests.e2e.test_emulator import Capture, decode_speaker, dominant_hz, play, tone, until

pytestmark = pytest.mark.e2e

ALICE, BOB = 3001, 3002
DAVE_ON = EmulatorConfig(dave=True, seed=11)


async def connect(client: discord.Client, emulator: DiscordEmulator, **kwargs: Any) -> discord.VoiceClient:
    channel = client.get_channel(emulator.voice_channel_id)
    assert isinstance(channel, discord.VoiceChannel)
    kwargs.setdefault("timeout", 10)
    return await channel.connect(**kwargs)


async def heard(vc: discord.VoiceClient, emulator: DiscordEmulator, user_id: int, freq: float) -> float:
    """Have ``user_id`` say a tone and return the dominant frequency the bot decoded (DAVE-decrypted
    while the call's protocol version is 1, as a receiver must)."""
    capture = Capture()
    vc._connection.add_socket_listener(capture)
    speaker = emulator.speaker(user_id)
    report = await speaker.say(tone(freq, 0.3))
    await until(lambda: len(capture.packets()) >= report.sent, "the packets")
    vc._connection.remove_socket_listener(capture)
    session = vc._connection.dave_session
    if vc._connection.dave_protocol_version == 0:
        vc._connection.dave_session = None  # transport-only: the frames are plain Opus
    try:
        pcm, count = decode_speaker(vc, capture.packets(), speaker.ssrc, user_id)
    finally:
        vc._connection.dave_session = session
    assert count == report.sent
    return dominant_hz(pcm)


@pytest.mark.parametrize("emulator", [DAVE_ON], indirect=True)
async def test_discordpy_never_resumes_after_4015(
    emulator: DiscordEmulator, discord_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """What unmodified discord.py 2.7.1 does with 4015 (``VoiceConnectionState._poll_voice_ws``):
    it logs "attempting a resume", sends main-gateway op 4 for the channel it is in and waits for
    *both* VOICE_STATE_UPDATE and VOICE_SERVER_UPDATE in its connecting states. But its flow state
    is still ``connected``: the state update only refreshes the channel, the server update closes
    the (already closed) socket with 4014 and sets ``got_voice_server_update``, and
    ``got_both_voice_updates`` never comes. So no op 7 is ever sent; after ``timeout`` it logs
    "Could not resume" and leaves the call. (Even past that wait, ``_handshake_websocket`` would
    poll the new socket for a SESSION_DESCRIPTION that a RESUME does not bring.) A bot on
    discord.py has to re-join by itself after 4015."""
    emulator.add_user(ALICE, "alice")
    client: discord.Client = discord_client()
    async with running_client(emulator, client):
        vc = await connect(client, emulator, reconnect=True, timeout=2.0)
        await emulator.wait_voice_ready()
        assert await heard(vc, emulator, ALICE, 440.0) == pytest.approx(440, abs=5)
        with caplog.at_level(logging.INFO, logger="discord.voice_state"):
            await emulator.close_voice(4015)
            await until(lambda: "Could not resume" in caplog.text, "discord.py to give up", timeout=10)
        await until(lambda: emulator.voice_session() is None, "the bot to leave", timeout=5)
        stats = emulator.voice_stats()
        assert stats["closes"][0] == (4015, True)
        assert stats["resumes"] == stats["failed_resumes"] == 0  # no op 7 ever came
        assert not vc.is_connected()


@pytest.mark.parametrize("emulator", [EmulatorConfig(dave=False, seed=13)], indirect=True)
async def test_resume_replays_what_was_missed(
    emulator: DiscordEmulator, discord_client: ClientFactory
) -> None:
    """RESUME as the v8 voice gateway does it: op 7 with the last ``seq`` seen, op 9, then every
    numbered message after it (here: Bob joining while the socket was down), in order; a RESUME
    with wrong credentials is answered 4006. Spoken by hand, as discord.py never resumes."""
    emulator.add_user(ALICE, "alice")
    client: discord.Client = discord_client()
    async with running_client(emulator, client):
        vc = await connect(client, emulator, reconnect=False)
        info = await emulator.wait_voice_ready()
        state = vc._connection
        last = emulator.voice_stats()["last_seq"]
        await until(lambda: vc.ws.seq_ack == last, "discord.py to see every message")
        seq_ack = vc.ws.seq_ack
        creds = {"server_id": str(emulator.guild_id), "session_id": state.session_id, "token": state.token}
        # Take the socket away from discord.py first, so its own 4015 handling stays out of the way.
        vc._connection._runner.cancel()  # type: ignore[union-attr]
        await emulator.close_voice(4015)
        emulator.add_user(BOB, "bob")  # op 11 while no socket serves the session
        await until(lambda: emulator.voice_session() is not None, "the session kept")
        http = client.http
        url = f"wss://127.0.0.1:{emulator.voice_port}/?v=8"
        async with await http.ws_connect(url) as ws:
            await ws.receive_json()
            await ws.send_json({"op": 7, "d": {**creds, "token": "wrong", "seq_ack": seq_ack}})
            closed = await ws.receive()
            assert ws.close_code == 4006, closed
        assert emulator.voice_stats()["failed_resumes"] == 1
        async with await http.ws_connect(url) as ws:
            hello = await ws.receive_json()
            assert hello["op"] == 8 and "seq" not in hello
            await ws.send_json({"op": 7, "d": {**creds, "seq_ack": seq_ack}})
            resumed = await ws.receive_json()
            assert resumed["op"] == 9
            replay = await ws.receive_json()
            assert (
                replay["op"] == 11 and replay["d"]["user_ids"] == [str(BOB)] and replay["seq"] == seq_ack + 1
            )
            stats = emulator.voice_stats()
            assert (stats["resumes"], stats["replayed"]) == (1, 1)
            session = emulator.voice_session()
            assert session is not None and session.bot_ssrc == info.bot_ssrc
        # A client's normal close (1000) ends the session.
        await until(lambda: emulator.voice_session() is None, "the session to end")
        await vc.disconnect(force=True)


@pytest.mark.parametrize("emulator", [DAVE_ON], indirect=True)
@pytest.mark.parametrize("code", [4006, 4014])
async def test_forced_4006_and_4014_end_the_session(
    emulator: DiscordEmulator, discord_client: ClientFactory, code: int
) -> None:
    """Neither close is resumable: the emulator drops the session at once (a RESUME of it gets
    4006). discord.py leaves on 4006 without ``reconnect``; on 4014 it waits ``timeout`` for a
    VOICE_SERVER_UPDATE (a move) that never comes, then leaves. (With ``reconnect=True`` discord.py
    2.7.1 re-identifies after 4006, but its reader thread may still sit in a 30 s ``select`` on the
    old socket and miss the IP discovery reply, so the retry can time out.)"""
    emulator.add_user(ALICE, "alice")
    client: discord.Client = discord_client()
    async with running_client(emulator, client):
        vc = await connect(client, emulator, reconnect=False, timeout=1.0)
        await emulator.wait_voice_ready()
        await emulator.close_voice(code)
        assert emulator.voice_session() is None  # ended at once, not kept for a RESUME
        assert emulator.voice_stats()["closes"] == [(code, False)]
        await until(lambda: not vc.is_connected(), "discord.py to leave", timeout=5)


@pytest.mark.parametrize("emulator", [DAVE_ON], indirect=True)
async def test_voice_server_move_and_udp_blackout(
    emulator: DiscordEmulator, discord_client: ClientFactory
) -> None:
    emulator.add_user(ALICE, "alice")
    client: discord.Client = discord_client()
    async with running_client(emulator, client):
        vc = await connect(client, emulator, reconnect=True)
        first = await emulator.wait_voice_ready()
        old_port = emulator.voice_stats()["endpoint_port"]
        new_port = emulator.move_voice_server()
        assert new_port != old_port
        # discord.py closes the old socket itself (4014) and identifies at the new endpoint.
        await until(
            lambda: (
                emulator.voice_session() is not None and emulator.voice_session().bot_ssrc != first.bot_ssrc
            ),
            "the move",
            20,
        )  # type: ignore[union-attr]
        moved = await emulator.wait_voice_ready()
        assert moved.privacy_code and moved.privacy_code == vc.voice_privacy_code
        assert (4014, False) in emulator.voice_stats()["closes"]
        assert vc.endpoint == f"127.0.0.1:{new_port}"
        assert await heard(vc, emulator, ALICE, 600.0) == pytest.approx(600, abs=5)

        # A UDP outage: whatever is sent meanwhile is lost, both ways; media flows again after it.
        # The outage is held open around the speech itself, so load cannot stretch the speech past it.
        capture = Capture()
        vc._connection.add_socket_listener(capture)
        async with emulator.udp_outage():
            lost = await emulator.speaker(ALICE).say(tone(300.0, 0.2))
        dropped = emulator.voice_stats()["udp_blackout_dropped"]
        assert dropped["out"] >= lost.sent and not [p for p in capture.packets() if len(p) > 16]
        vc._connection.remove_socket_listener(capture)
        assert await heard(vc, emulator, ALICE, 700.0) == pytest.approx(700, abs=5)
        await vc.disconnect()


@pytest.mark.parametrize("emulator", [DAVE_ON], indirect=True)
async def test_invalid_commit_is_reported_and_the_bot_rejoins_once(
    emulator: DiscordEmulator, discord_client: ClientFactory
) -> None:
    """discord.py sends op 31 as JSON; the emulator keeps the connection, and the bot's new key
    package replaces its old leaf (one entry per member, not two)."""
    emulator.add_user(ALICE, "alice")
    client: discord.Client = discord_client()
    async with running_client(emulator, client):
        vc = await connect(client, emulator, reconnect=False)
        first = await emulator.wait_voice_ready()
        before = sorted(emulator.dave_members())
        transition = await emulator.dave_send_invalid_commit()
        await until(lambda: transition in emulator.voice_stats()["invalid_reports"], "op 31")
        again = await emulator.wait_dave_synced()
        assert again.bot_ssrc == first.bot_ssrc  # the same connection throughout
        assert emulator.voice_stats()["closes"] == []
        assert sorted(emulator.dave_members()) == before
        session = vc._connection.dave_session
        assert sorted(session.get_user_ids()) == sorted(str(u) for u in before)
        assert vc.voice_privacy_code == again.privacy_code != first.privacy_code
        assert await heard(vc, emulator, ALICE, 480.0) == pytest.approx(480, abs=5)
        await vc.disconnect()


@pytest.mark.parametrize("emulator", [EmulatorConfig(dave=True, seed=12, client_commits=True)], indirect=True)
async def test_the_bots_commit_wins(emulator: DiscordEmulator, discord_client: ClientFactory) -> None:
    """With client_commits the bot's op 28 (commit || welcome) is the winning commit: the emulator's
    members follow it, Bob joins with its Welcome, and the bot merges its own commit on op 29."""
    emulator.add_user(ALICE, "alice")
    client: discord.Client = discord_client()
    async with running_client(emulator, client):
        vc = await connect(client, emulator, reconnect=False)
        await emulator.wait_voice_ready()
        emulator.add_user(BOB, "bob")
        assert await heard(vc, emulator, BOB, 660.0) == pytest.approx(660, abs=5)
        stats = emulator.voice_stats()
        assert (stats["client_commits_won"], stats["recorder_commits"]) == (1, 0)
        session = emulator.voice_session()
        assert session is not None and vc.voice_privacy_code == session.privacy_code
        await emulator.speaker(ALICE).leave()
        await until(lambda: emulator.voice_stats()["client_commits_won"] == 2, "the removal commit")
        assert sorted(vc._connection.dave_session.get_user_ids()) == sorted(
            str(u) for u in (BOB, emulator.bot_user_id, emulator.recorder_user_id)
        )
        assert await heard(vc, emulator, BOB, 500.0) == pytest.approx(500, abs=5)
        await vc.disconnect()


@pytest.mark.parametrize("emulator", [DAVE_ON], indirect=True)
async def test_downgrade_to_transport_only_and_upgrade_back(
    emulator: DiscordEmulator, discord_client: ClientFactory
) -> None:
    """op 21 (protocol 0) -> op 23 -> op 22: plain Opus both ways; op 24 (epoch 1) -> key package ->
    op 30 -> op 23 -> op 22: a new group, end-to-end encrypted again, same external sender."""
    emulator.add_user(ALICE, "alice")
    client: discord.Client = discord_client()
    async with running_client(emulator, client):
        vc = await connect(client, emulator, reconnect=False)
        first = await emulator.wait_voice_ready()
        assert await heard(vc, emulator, ALICE, 440.0) == pytest.approx(440, abs=5)

        await emulator.dave_downgrade()
        await until(lambda: vc._connection.dave_protocol_version == 0, "discord.py to downgrade")
        session = emulator.voice_session()
        assert session is not None and not session.dave_enabled and session.privacy_code is None
        assert await heard(vc, emulator, ALICE, 500.0) == pytest.approx(500, abs=5)
        await play(vc, tone(880.0, 0.4))
        await until(lambda: emulator.bot_audio.silence_frames >= 5, "the end of playback")
        assert dominant_hz(emulator.bot_audio.pcm()) == pytest.approx(880, abs=5)
        assert emulator.bot_audio.decrypt_failures == emulator.bot_audio.decode_failures == 0

        upgraded = await emulator.dave_upgrade()
        await until(lambda: vc._connection.dave_protocol_version == 1, "discord.py to upgrade")
        assert upgraded.dave_enabled and upgraded.privacy_code != first.privacy_code
        assert vc.voice_privacy_code == upgraded.privacy_code
        assert await heard(vc, emulator, ALICE, 600.0) == pytest.approx(600, abs=5)
        emulator.bot_audio.reset()
        await play(vc, tone(700.0, 0.4))
        await until(lambda: emulator.bot_audio.silence_frames >= 5, "the end of playback")
        assert dominant_hz(emulator.bot_audio.pcm()) == pytest.approx(700, abs=5)
        assert emulator.bot_audio.decrypt_failures == 0
        await vc.disconnect()


@pytest.mark.parametrize("emulator", [DAVE_ON], indirect=True)
async def test_every_scripted_voice_event_runs(
    emulator: DiscordEmulator, discord_client: ClientFactory
) -> None:
    """Each scenario ``voice`` event through ``apply_voice_event``, audio checked after each."""
    emulator.add_user(ALICE, "alice")
    client: discord.Client = discord_client()
    async with running_client(emulator, client):
        vc = await connect(client, emulator, reconnect=True)
        await emulator.wait_voice_ready()
        script = [
            VoiceEvent(at=0.0, voice="blackout", seconds=0.1),
            VoiceEvent(at=0.0, voice="dave_invalid_commit"),
            VoiceEvent(at=0.0, voice="dave_downgrade"),
            VoiceEvent(at=0.0, voice="dave_upgrade"),
            VoiceEvent(at=0.0, voice="move"),
        ]
        for i, event in enumerate(script):
            said = await emulator.apply_voice_event(event)
            assert said
            if event.voice == "move":
                await until(lambda: (4014, False) in emulator.voice_stats()["closes"], "the move")
                await emulator.wait_voice_ready(timeout=20)
            await emulator.wait_dave_synced()
            await until(lambda: vc.is_connected() and vc.ssrc == emulator.voice_session().bot_ssrc, "the bot")  # type: ignore[union-attr]
            freq = 400.0 + 50 * i
            assert await heard(vc, emulator, ALICE, freq) == pytest.approx(freq, abs=5), event
        assert "4015" in await emulator.apply_voice_event(VoiceEvent(at=0.0, voice="close"))
        assert emulator.voice_stats()["closes"][-1] == (4015, True)
        await vc.disconnect(force=True)


@pytest.mark.parametrize("emulator", [DAVE_ON], indirect=True)
async def test_binary_op31_is_accepted_too(emulator: DiscordEmulator, discord_client: ClientFactory) -> None:
    """op 31 as binary (``u8 31 || >H transition_id``) is a report like the JSON one, not an unknown
    opcode: the connection stays, and the key package that follows re-joins the bot."""
    emulator.add_user(ALICE, "alice")
    client: discord.Client = discord_client()
    async with running_client(emulator, client):
        vc = await connect(client, emulator, reconnect=False)
        first = await emulator.wait_voice_ready()
        await vc.ws.send_binary(31, struct.pack(">H", 7))
        await until(lambda: emulator.voice_stats()["invalid_reports"] == [7], "the binary op 31")
        await vc._connection.reinit_dave_session()  # what a client does after reporting (op 26)
        again = await emulator.wait_dave_synced()
        assert emulator.voice_stats()["closes"] == [] and again.bot_ssrc == first.bot_ssrc
        assert sorted(vc._connection.dave_session.get_user_ids()) == sorted(
            str(u) for u in emulator.dave_members()
        )
        assert await heard(vc, emulator, ALICE, 450.0) == pytest.approx(450, abs=5)
        await vc.disconnect()
