"""Transport decryption of rtpsize packets built by hand from the spec (not by our own sealer)."""

from __future__ import annotations

import struct

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from nacl.bindings import crypto_aead_xchacha20poly1305_ietf_encrypt

from openab_voice.discord.wire.rtp import build_header, is_ip_discovery, is_rtcp, parse_header
from openab_voice.discord.wire.transport import AES_GCM, XCHACHA, cipher_for, open_packet, seal_packet
from openab_voice.errors import PacketError, VoiceError

KEY = bytes(range(32))
OPUS = b"\xfc\x01\x02\x03opus-frame"
EXT_BODY = b"\x10\x7f\x00\x00"  # one RFC 8285 element + padding, as Discord clients send


def spec_packet(
    mode: str,
    *,
    key: bytes = KEY,
    csrcs: tuple[int, ...] = (),
    extension: bytes | None = None,
    padding: int = 0,
    counter: int = 7,
    sequence: int = 1234,
    timestamp: int = 987_654,
    ssrc: int = 0xDEADBEEF,
) -> bytes:
    """``header(AAD: fixed + CSRCs + extension preamble) || AEAD(ext body + payload + padding) || nonce4``."""
    b0 = 0x80 | len(csrcs) | (0x10 if extension is not None else 0) | (0x20 if padding else 0)
    header = struct.pack(">BBHII", b0, 0x78, sequence, timestamp, ssrc)
    header += b"".join(struct.pack(">I", c) for c in csrcs)
    plaintext = OPUS
    if extension is not None:
        header += struct.pack(">HH", 0xBEDE, len(extension) // 4)
        plaintext = extension + plaintext
    if padding:
        plaintext += bytes(padding - 1) + bytes([padding])
    nonce = struct.pack(">I", counter)
    if mode == XCHACHA:
        sealed = crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, header, nonce + bytes(20), key)
    else:
        sealed = AESGCM(key).encrypt(nonce + bytes(8), plaintext, header)
    return header + sealed + nonce


@pytest.mark.parametrize("mode", [XCHACHA, AES_GCM])
@pytest.mark.parametrize(
    ("csrcs", "extension", "padding"),
    [
        ((), None, 0),
        ((), EXT_BODY, 0),
        ((11, 22), None, 0),
        ((11,), EXT_BODY, 0),
        ((), None, 4),
        ((33, 44, 55), EXT_BODY + b"\x21\x01\x02\x00", 3),
    ],
)
def test_spec_packets_decrypt(
    mode: str, csrcs: tuple[int, ...], extension: bytes | None, padding: int
) -> None:
    data = spec_packet(mode, csrcs=csrcs, extension=extension, padding=padding)
    header, payload = open_packet(cipher_for(mode, KEY), data)
    assert payload == OPUS
    assert (header.sequence, header.timestamp, header.ssrc) == (1234, 987_654, 0xDEADBEEF)
    assert header.csrc_count == len(csrcs)
    assert header.has_extension is (extension is not None)
    assert header.header_len == 12 + 4 * len(csrcs) + (4 if extension is not None else 0)


@pytest.mark.parametrize("mode", [XCHACHA, AES_GCM])
def test_wrong_key_is_transport_decrypt_failed(mode: str) -> None:
    data = spec_packet(mode, extension=EXT_BODY)
    with pytest.raises(PacketError) as info:
        open_packet(cipher_for(mode, bytes(32)), data)
    assert info.value.code == "TRANSPORT_DECRYPT_FAILED"


@pytest.mark.parametrize("mode", [XCHACHA, AES_GCM])
def test_tampered_header_fails_authentication(mode: str) -> None:
    data = bytearray(spec_packet(mode, extension=EXT_BODY))
    data[8] ^= 0x01  # the SSRC is AAD: changing it must not go unnoticed
    with pytest.raises(PacketError) as info:
        open_packet(cipher_for(mode, KEY), bytes(data))
    assert info.value.code == "TRANSPORT_DECRYPT_FAILED"


@pytest.mark.parametrize("cut", [5, 12, 15, 20, 30])
def test_truncated_packets(cut: int) -> None:
    data = spec_packet(XCHACHA, extension=EXT_BODY)[:cut]
    with pytest.raises(PacketError) as info:
        open_packet(cipher_for(XCHACHA, KEY), data)
    assert info.value.code == "RTP_TRUNCATED"


def test_bad_version() -> None:
    data = bytearray(spec_packet(XCHACHA))
    data[0] = (data[0] & 0x3F) | 0x40
    with pytest.raises(PacketError) as info:
        parse_header(bytes(data))
    assert info.value.code == "RTP_BAD_VERSION"


def test_extension_longer_than_payload_is_truncated() -> None:
    data = bytearray(spec_packet(XCHACHA, extension=EXT_BODY))
    header = bytes(data[:16])
    # Claim 40 words of extension body over a short encrypted payload (re-seal so AEAD passes).
    forged = header[:12] + struct.pack(">HH", 0xBEDE, 40)
    sealed = crypto_aead_xchacha20poly1305_ietf_encrypt(b"short", forged, bytes(24), KEY)
    with pytest.raises(PacketError) as info:
        open_packet(cipher_for(XCHACHA, KEY), forged + sealed + bytes(4))
    assert info.value.code == "RTP_TRUNCATED"


@pytest.mark.parametrize("mode", [XCHACHA, AES_GCM])
@pytest.mark.parametrize("extension", [None, b"\x10\x7f"])
def test_seal_packet_matches_spec(mode: str, extension: bytes | None) -> None:
    cipher = cipher_for(mode, KEY)
    header, body = build_header(1234, 987_654, 0xDEADBEEF, extension=extension)
    sealed = seal_packet(cipher, header, body, OPUS, 7)
    expected = spec_packet(mode, extension=EXT_BODY if extension else None)
    assert sealed == expected
    assert open_packet(cipher, sealed)[1] == OPUS


def test_classifiers_and_bad_modes() -> None:
    assert is_rtcp(b"\x80\xc9" + bytes(30))
    assert not is_rtcp(spec_packet(XCHACHA))
    assert is_ip_discovery(b"\x00\x02\x00\x46" + bytes(70))
    with pytest.raises(VoiceError) as info:
        cipher_for("xsalsa20_poly1305", KEY)
    assert info.value.code == "TRANSPORT_UNSUPPORTED_MODE"
    with pytest.raises(VoiceError) as info:
        cipher_for(XCHACHA, b"short")
    assert info.value.code == "TRANSPORT_BAD_KEY"
