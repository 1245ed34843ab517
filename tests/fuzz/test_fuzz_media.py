"""Fuzzing the media path: RTP headers and extensions, transport decryption, DAVE frames, and the
whole receive pipeline. Allowed outcomes: a parsed value, or a ``PacketError`` whose code is a
counted drop reason; the pipeline never raises and counts every datagram exactly once. Each target
asserts its tally once its examples ran (``tests/fuzz/tallies.py``)."""

from __future__ import annotations

from typing import Any

import davey
from hypothesis import example, given
from hypothesis import strategies as st

from openab_voice.discord.wire import stats as reasons
from openab_voice.discord.wire.pipeline import ReceivePipeline, ReceiverSettings
from openab_voice.discord.wire.rtp import (
    MIN_RTP_PACKET,
    OPUS_SILENCE,
    RtpHeader,
    build_header,
    parse_header,
    strip_encrypted_parts,
)
from openab_voice.discord.wire.stats import reason_for_code
from openab_voice.discord.wire.transport import AES_GCM, XCHACHA, cipher_for, open_packet, seal_packet
from openab_voice.errors import PacketError
from openab_voice.testing.emulator.mls import DaveGroup
from tests.fuzz.tallies import ACCEPTED, REJECTED, Tally

KEY = bytes(range(32))
CIPHERS = {mode: cipher_for(mode, KEY) for mode in (XCHACHA, AES_GCM)}
KNOWN_REASONS = {v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, str)}
CHANNEL, ALICE, BOB, BOT = 77_000, 101, 102, 999
ALICE_SSRC, BOB_SSRC = 0x1111, 0x2222

# An RTP-looking first byte (version 2, any P/X/CC) more often than chance would give.
rtp_like = st.builds(
    lambda b0, rest: bytes([b0]) + rest,
    st.integers(0x80, 0xBF),
    st.binary(min_size=11, max_size=200),
)
datagrams = st.one_of(st.binary(max_size=300), rtp_like)


def rejected(tally: Tally, exc: PacketError) -> None:
    reason = reason_for_code(exc.code)
    assert reason in KNOWN_REASONS, exc.code
    tally.counts[REJECTED + reason] += 1


_GOOD_HEADER, _GOOD_BODY = build_header(7, 960, 0xABCD, extension=b"\x10\x7f")


def test_rtp_header(tally: Tally) -> None:
    @example(_GOOD_HEADER + _GOOD_BODY + bytes(20))
    @example(b"\x80\x78")
    @given(datagrams)
    def target(data: bytes) -> None:
        tally.inputs += 1
        try:
            header = parse_header(data)
        except PacketError as exc:
            rejected(tally, exc)
            return
        tally.counts[ACCEPTED] += 1
        assert len(data) >= MIN_RTP_PACKET and header.header_len + 4 <= len(data)
        assert header.header_len == 12 + 4 * header.csrc_count + (4 if header.has_extension else 0)

    target()
    tally.check()


def _header(*, csrc_count: int = 0, has_extension: bool = False, extension_words: int = 0) -> RtpHeader:
    return RtpHeader(
        sequence=1,
        timestamp=1,
        ssrc=1,
        payload_type=0x78,
        marker=False,
        padding=False,
        csrc_count=csrc_count,
        has_extension=has_extension,
        extension_words=extension_words,
        header_len=12,
    )


def test_extension_and_padding_strip(tally: Tally) -> None:
    @example(_header(), b"opus")
    @example(_header(has_extension=True, extension_words=2), b"\x00\x01")
    @given(
        st.builds(
            RtpHeader,
            sequence=st.just(1),
            timestamp=st.just(1),
            ssrc=st.just(1),
            payload_type=st.just(0x78),
            marker=st.booleans(),
            padding=st.booleans(),
            csrc_count=st.integers(0, 15),
            has_extension=st.booleans(),
            extension_words=st.integers(0, 0xFFFF),
            header_len=st.just(12),
        ),
        st.binary(max_size=120),
    )
    def target(header: RtpHeader, plaintext: bytes) -> None:
        tally.inputs += 1
        try:
            media = strip_encrypted_parts(header, plaintext)
        except PacketError as exc:
            rejected(tally, exc)
            return
        tally.counts[ACCEPTED] += 1
        assert len(media) <= len(plaintext)

    target()
    tally.check()


def test_transport_open(tally: Tally) -> None:
    """A sealed packet opens to exactly its payload; any change to it is a counted rejection."""

    @example(XCHACHA, 1, 960, None, b"opus", 5, [])
    @example(AES_GCM, 1, 960, None, b"opus", 5, [(399, 1)])  # the last byte: the tag or the nonce
    @given(
        st.sampled_from(sorted(CIPHERS)),
        st.integers(0, 0xFFFF),
        st.integers(0, 0xFFFFFFFF),
        st.one_of(st.none(), st.binary(min_size=1, max_size=24)),
        st.binary(max_size=200),
        st.integers(0, 0xFFFFFFFF),
        st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=3),
    )
    def target(
        mode: str,
        seq: int,
        ts: int,
        extension: bytes | None,
        payload: bytes,
        counter: int,
        flips: list[tuple[int, int]],
    ) -> None:
        tally.inputs += 1
        cipher = CIPHERS[mode]
        header, body = build_header(seq, ts, 0xABCD, extension=extension)
        packet = bytearray(seal_packet(cipher, header, body, payload, counter))
        for at, xor in flips:
            packet[at % len(packet)] ^= xor or 1
        try:
            parsed, media = open_packet(cipher, bytes(packet))
        except PacketError as exc:
            assert flips, "an untouched packet must open"
            rejected(tally, exc)
            return
        tally.counts[ACCEPTED] += 1
        if not flips:
            assert (parsed.sequence, parsed.timestamp, parsed.ssrc, media) == (seq, ts, 0xABCD, payload)

    target()
    tally.check()


def test_transport_open_random_bytes(tally: Tally) -> None:
    """Bytes never sealed with the key never open: that would take forging a 16-byte tag."""

    @example(XCHACHA, b"")
    @given(st.sampled_from(sorted(CIPHERS)), datagrams)
    def target(mode: str, data: bytes) -> None:
        tally.inputs += 1
        try:
            open_packet(CIPHERS[mode], data)
        except PacketError as exc:
            rejected(tally, exc)
            return
        tally.counts[ACCEPTED] += 1

    target()
    tally.check(seen=(REJECTED,), never=(ACCEPTED,))


_GROUP = DaveGroup(CHANNEL, [ALICE, BOB])
_BOT_SESSION = davey.DaveSession(1, BOT, CHANNEL)
_BOT_SESSION.set_external_sender(_GROUP.external_sender.serialized())
_BOT_SESSION.process_welcome(_GROUP.admit(_BOT_SESSION.get_serialized_key_package())[1])
_REAL_FRAME = bytes(_GROUP.sessions[ALICE].encrypt_opus(b"\xfc" + bytes(40)))


def test_dave_frame_decrypt(tally: Tally) -> None:
    """davey is Rust: a panic would surface as pyo3's PanicException, a BaseException that the
    receiver's ``except Exception`` would not catch. A frame it cannot decrypt is a ``ValueError``
    (what the receiver counts as ``dave_decrypt_failed``); any other exception fails the test."""

    @example(_REAL_FRAME, ALICE)
    @example(_REAL_FRAME, BOB)  # not who encrypted it
    @given(
        st.one_of(
            st.binary(max_size=120),
            st.builds(
                lambda at, xor, cut: bytes(
                    b ^ (xor if i == at % len(_REAL_FRAME) else 0) for i, b in enumerate(_REAL_FRAME)
                )[:cut],
                st.integers(0, 200),
                st.integers(0, 255),
                st.integers(0, 200),
            ),
        ),
        st.sampled_from([ALICE, BOB, 12345, 0, 2**64 - 1]),
    )
    def target(frame: bytes, sender: int) -> None:
        tally.inputs += 1
        try:
            plain = _BOT_SESSION.decrypt(sender, davey.MediaType.audio, frame)
        except ValueError:
            tally.counts[REJECTED + "ValueError"] += 1
            return
        tally.counts[ACCEPTED] += 1
        assert isinstance(plain, bytes)

    target()
    tally.check()


def _sealed(mode: str, ssrc: int, seq: int, payload: bytes, *, extension: bool) -> bytes:
    header, body = build_header(seq, seq * 960, ssrc, extension=b"\x10\x7f" if extension else None)
    return seal_packet(CIPHERS[mode], header, body, payload, seq)


Step = tuple[str, object]


@st.composite
def receive_scripts(draw: st.DrawFn) -> tuple[str, bool, list[Step]]:
    """Steps only: packets are built (and DAVE-encrypted, which is not deterministic) in the test,
    so every draw depends on earlier draws alone."""
    mode = draw(st.sampled_from(sorted(CIPHERS)))
    dave = draw(st.booleans())
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(
            st.sampled_from(["good", "good", "garbage", "mutated", "map", "remove", "tick", "silence"])
        )
        if kind in ("good", "mutated", "silence"):
            spec = (
                kind,
                draw(st.sampled_from([ALICE_SSRC, BOB_SSRC, 0x3333])),
                draw(st.integers(0, 0xFFFF)),
                draw(st.binary(max_size=80)),
                draw(st.booleans()),  # DAVE-encrypt it (when the call is DAVE)
                draw(st.booleans()),  # header extension
                draw(st.integers(0, 10_000)),  # where to flip a byte (mutated)
                draw(st.integers(1, 255)),
            )
            steps.append(("packet", spec))
        elif kind == "garbage":
            steps.append(("raw", draw(datagrams)))
        elif kind == "map":
            ssrc = draw(st.sampled_from([ALICE_SSRC, BOB_SSRC, 0x3333]))
            user = draw(st.sampled_from([str(ALICE), str(BOB), "x", "\u0663", str(2**70)]))
            steps.append(("map", (ssrc, user)))
        elif kind == "remove":
            steps.append(("remove", draw(st.sampled_from([str(ALICE), str(BOB), "nobody"]))))
        else:
            steps.append(("tick", draw(st.floats(0.0, 30.0))))
    return mode, dave, steps


def _build(mode: str, dave: bool, spec: Any) -> bytes:
    kind, ssrc, seq, payload, encrypt, extension, at, xor = spec
    if kind == "silence":
        payload = OPUS_SILENCE
    elif dave and encrypt:
        sender = ALICE if ssrc == ALICE_SSRC else BOB
        payload = bytes(_GROUP.sessions[sender].encrypt_opus(b"\xfc" + payload))
    packet = _sealed(mode, ssrc, seq, payload, extension=extension)
    if kind == "mutated":
        at %= len(packet)
        packet = packet[:at] + bytes([packet[at] ^ xor]) + packet[at + 1 :]
    return packet


_SMALL_SCRIPT = (
    XCHACHA,
    False,
    [
        ("map", (ALICE_SSRC, str(ALICE))),
        ("packet", ("good", ALICE_SSRC, 1, b"\xfc" + bytes(20), False, False, 0, 1)),
        ("raw", b"\x00"),
    ],
)


def test_receive_pipeline(tally: Tally) -> None:
    """Datagrams, op 5 / op 13 and time in any order: nothing raises; every datagram is counted
    once: attributed to a speaker (and delivered or dropped by reason), dropped unattributed by
    reason, or still held for its SSRC. The tally's inputs are datagrams."""

    @example(_SMALL_SCRIPT)
    @given(receive_scripts())
    def target(script: tuple[str, bool, list[Step]]) -> None:
        mode, dave, steps = script
        frames: list[object] = []
        pipeline = ReceivePipeline(settings=ReceiverSettings(), emit=frames.append, publish=lambda _e: None)
        pipeline.set_transport(CIPHERS[mode])
        if dave:
            pipeline.set_dave_source(lambda: _BOT_SESSION)
        now, fed = 0.0, 0
        for kind, value in steps:
            if kind in ("packet", "raw"):
                data = _build(mode, dave, value) if kind == "packet" else value
                assert isinstance(data, bytes)
                now += 0.02
                pipeline.handle_packet(data, now)
                fed += 1
            elif kind == "map":
                assert isinstance(value, tuple)
                ssrc, user = value
                pipeline.map_ssrc(ssrc, user, now)
            elif kind == "remove":
                assert isinstance(value, str)
                pipeline.remove_user(value, now)
            else:
                assert isinstance(value, float)
                now += value
                pipeline.tick(now)
        tally.inputs += fed
        snap = pipeline.snapshot()
        attributed = sum(s["packets"] for s in snap["speakers"].values())
        unattributed = sum(snap["unattributed"].values())
        held = sum(len(q) for q in pipeline._held.values())
        assert attributed + unattributed + held == fed
        assert set(snap["unattributed"]) <= KNOWN_REASONS
        for speaker in snap["speakers"].values():
            assert set(speaker["dropped"]) <= KNOWN_REASONS
            dropped = sum(speaker["dropped"].values())
            assert dropped <= speaker["packets"], speaker
            tally.counts.update({f"{REJECTED}speaker:{r}": n for r, n in speaker["dropped"].items()})
            if speaker["packets"] > dropped:
                tally.counts[f"{ACCEPTED}:attributed"] += speaker["packets"] - dropped
        tally.counts.update({f"{REJECTED}unattributed:{r}": n for r, n in snap["unattributed"].items()})
        if held:
            tally.counts["held"] += held

    target()
    tally.check(buckets=(ACCEPTED, REJECTED, "held"), seen=(ACCEPTED, REJECTED))
