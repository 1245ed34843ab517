"""RTP framing as Discord uses it (RFC 3550 header, RFC 8285 one-byte extensions).

In the ``*_rtpsize`` transport modes the unencrypted header (the AAD) is the fixed 12 bytes,
the CSRCs and, when the X bit is set, the 4-byte extension *preamble* (``BE DE`` + length in
32-bit words). The extension *body* is encrypted together with the payload and must be
stripped after decryption (Discord docs, "Transport Encryption Modes"; discord-ext-voice-recv
``rtp.py adjust_rtpsize``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from openab_voice.errors import ErrorCode, PacketError

RTP_VERSION = 2
OPUS_PAYLOAD_TYPE = 0x78
OPUS_SILENCE = b"\xf8\xff\xfe"
ONE_BYTE_EXTENSION_PROFILE = 0xBEDE
_HEADER = struct.Struct(">BBHII")
MIN_RTP_PACKET = 12 + 4  # header + the 4-byte nonce suffix of the rtpsize modes


@dataclass(frozen=True, slots=True)
class RtpHeader:
    """The parsed unencrypted part of an RTP packet."""

    sequence: int
    timestamp: int
    ssrc: int
    payload_type: int
    marker: bool
    padding: bool
    csrc_count: int
    has_extension: bool
    extension_words: int  # length of the (encrypted) extension body in 32-bit words
    header_len: int  # bytes of AAD: 12 + 4*CC (+4 preamble when X)


def is_rtcp(data: bytes) -> bool:
    """RTCP packet types 200..204 sit where RTP has marker+payload type (RFC 5761 §4)."""
    return len(data) >= 2 and 200 <= data[1] <= 204


def is_ip_discovery(data: bytes) -> bool:
    """discord.py's IP discovery reply shares the socket: 74 bytes, type 0x0002."""
    return len(data) == 74 and data[0] == 0 and data[1] == 2


def parse_header(data: bytes) -> RtpHeader:
    """Parse the unencrypted RTP header.

    Raises:
        PacketError: ``RTP_TRUNCATED`` or ``RTP_BAD_VERSION``.
    """
    if len(data) < MIN_RTP_PACKET:
        raise PacketError("packet shorter than an RTP header", code=ErrorCode.RTP_TRUNCATED)
    b0, b1, seq, ts, ssrc = _HEADER.unpack_from(data)
    if b0 >> 6 != RTP_VERSION:
        raise PacketError("not RTP version 2", code=ErrorCode.RTP_BAD_VERSION)
    cc = b0 & 0x0F
    has_ext = bool(b0 & 0x10)
    hlen = 12 + 4 * cc
    ext_words = 0
    if has_ext:
        if len(data) < hlen + 4 + 4:
            raise PacketError("extension preamble truncated", code=ErrorCode.RTP_TRUNCATED)
        _profile, ext_words = struct.unpack_from(">HH", data, hlen)
        hlen += 4
    if len(data) < hlen + 4:
        raise PacketError("header longer than packet", code=ErrorCode.RTP_TRUNCATED)
    return RtpHeader(
        sequence=seq,
        timestamp=ts,
        ssrc=ssrc,
        payload_type=b1 & 0x7F,
        marker=bool(b1 & 0x80),
        padding=bool(b0 & 0x20),
        csrc_count=cc,
        has_extension=has_ext,
        extension_words=ext_words,
        header_len=hlen,
    )


def strip_encrypted_parts(header: RtpHeader, plaintext: bytes) -> bytes:
    """Remove the extension body (and RTP padding) from a decrypted rtpsize payload."""
    start = header.extension_words * 4 if header.has_extension else 0
    end = len(plaintext)
    if header.padding and plaintext:
        end -= plaintext[-1]
    if start > end:
        raise PacketError("extension body longer than payload", code=ErrorCode.RTP_TRUNCATED)
    return plaintext[start:end]


def build_header(
    sequence: int, timestamp: int, ssrc: int, *, extension: bytes | None = None
) -> tuple[bytes, bytes]:
    """Build an RTP header for the rtpsize modes.

    Args:
        extension: RFC 8285 one-byte extension elements, zero-padded to a multiple of 4 here.

    Returns:
        ``(aad_header, extension_body)``: the header to send in clear (with the preamble when an
        extension is present) and the body to encrypt in front of the payload.
    """
    if extension is None:
        return _HEADER.pack(0x80, OPUS_PAYLOAD_TYPE, sequence & 0xFFFF, timestamp & 0xFFFFFFFF, ssrc), b""
    body = extension + b"\x00" * (-len(extension) % 4)
    head = _HEADER.pack(0x90, OPUS_PAYLOAD_TYPE, sequence & 0xFFFF, timestamp & 0xFFFFFFFF, ssrc)
    return head + struct.pack(">HH", ONE_BYTE_EXTENSION_PROFILE, len(body) // 4), body
