"""Transport encryption of Discord voice RTP (the layer under DAVE).

Both modes Discord offers today are implemented: ``aead_xchacha20_poly1305_rtpsize`` (what
discord.py 2.7 selects) and ``aead_aes256_gcm_rtpsize``. Packet layout:
``header (AAD) || ciphertext+tag || nonce counter (4 bytes, big-endian)``. The 4-byte counter is
zero-extended on the right to the cipher's nonce size (24 bytes for XChaCha20, 12 for AES-GCM).
"""

from __future__ import annotations

import struct
from typing import Final, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from nacl.bindings import (
    crypto_aead_xchacha20poly1305_ietf_decrypt,
    crypto_aead_xchacha20poly1305_ietf_encrypt,
)
from nacl.exceptions import CryptoError

from openab_voice.discord.wire.rtp import RtpHeader, parse_header, strip_encrypted_parts
from openab_voice.errors import ErrorCode, PacketError, VoiceError

XCHACHA: Final = "aead_xchacha20_poly1305_rtpsize"
AES_GCM: Final = "aead_aes256_gcm_rtpsize"
SUPPORTED_MODES: Final = (XCHACHA, AES_GCM)
NONCE_SUFFIX = 4
_COUNTER = struct.Struct(">I")


class TransportCipher(Protocol):
    """Seals and opens rtpsize packets with one session key."""

    mode: str

    def seal(self, header: bytes, plaintext: bytes, counter: int) -> bytes: ...

    def open(self, packet: bytes, header_len: int) -> bytes: ...


class _XChaCha:
    mode = XCHACHA

    def __init__(self, key: bytes) -> None:
        self._key = key

    def seal(self, header: bytes, plaintext: bytes, counter: int) -> bytes:
        nonce = _COUNTER.pack(counter & 0xFFFFFFFF)
        ct = crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, header, nonce + bytes(20), self._key)
        return header + ct + nonce

    def open(self, packet: bytes, header_len: int) -> bytes:
        nonce = packet[-NONCE_SUFFIX:]
        try:
            return bytes(
                crypto_aead_xchacha20poly1305_ietf_decrypt(
                    packet[header_len:-NONCE_SUFFIX], packet[:header_len], nonce + bytes(20), self._key
                )
            )
        except CryptoError as exc:
            raise PacketError("transport decryption failed", code=ErrorCode.TRANSPORT_DECRYPT_FAILED) from exc


class _AesGcm:
    mode = AES_GCM

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    def seal(self, header: bytes, plaintext: bytes, counter: int) -> bytes:
        nonce = _COUNTER.pack(counter & 0xFFFFFFFF)
        return header + self._aead.encrypt(nonce + bytes(8), plaintext, header) + nonce

    def open(self, packet: bytes, header_len: int) -> bytes:
        nonce = packet[-NONCE_SUFFIX:]
        try:
            return self._aead.decrypt(nonce + bytes(8), packet[header_len:-NONCE_SUFFIX], packet[:header_len])
        except InvalidTag as exc:
            raise PacketError("transport decryption failed", code=ErrorCode.TRANSPORT_DECRYPT_FAILED) from exc


def cipher_for(mode: str, key: bytes) -> TransportCipher:
    """Return the cipher for a negotiated mode.

    Raises:
        VoiceError: ``TRANSPORT_UNSUPPORTED_MODE`` for any other mode, ``TRANSPORT_BAD_KEY`` for a key
            that is not 32 bytes.
    """
    if len(key) != 32:
        raise VoiceError("transport key must be 32 bytes", code=ErrorCode.TRANSPORT_BAD_KEY)
    if mode == XCHACHA:
        return _XChaCha(key)
    if mode == AES_GCM:
        return _AesGcm(key)
    raise VoiceError(
        f"unsupported transport mode {mode!r}", code=ErrorCode.TRANSPORT_UNSUPPORTED_MODE, mode=mode
    )


def seal_packet(
    cipher: TransportCipher, header: bytes, extension_body: bytes, payload: bytes, counter: int
) -> bytes:
    """Encrypt ``extension_body + payload`` behind ``header`` (see :func:`rtp.build_header`)."""
    return cipher.seal(header, extension_body + payload, counter)


def open_packet(cipher: TransportCipher, packet: bytes) -> tuple[RtpHeader, bytes]:
    """Parse, decrypt and strip one rtpsize packet; returns the header and the media payload.

    Raises:
        PacketError: with the drop reason as ``code``.
    """
    header = parse_header(packet)
    if len(packet) - header.header_len - NONCE_SUFFIX < 16:  # shorter than an AEAD tag
        raise PacketError("ciphertext shorter than the AEAD tag", code=ErrorCode.RTP_TRUNCATED)
    plaintext = cipher.open(packet, header.header_len)
    return header, strip_encrypted_parts(header, plaintext)
