"""Just enough of the MLS wire format (RFC 9420) to read what DAVE clients send the voice server.

The voice server never decrypts MLS, but it has to find two things in client messages:

* whose KeyPackage an op 26 carries (the basic credential's identity, the user id as 8 bytes
  big-endian), to replace that user's old leaf when it re-joins;
* where the commit ends in an op 28: clients send ``commit || welcome`` back to back (discord.py:
  ``result.commit + result.welcome``; discord.js: ``Buffer.concat([commit, welcome])``), with no
  length in front of either.

Layouts (RFC 9420 §6, §7.2, §10, §12.4, §12.4.3.1; variable-length vectors use the two-bit
length prefix of §2.1.2)::

    MLSMessage    = u16 version || u16 wire_format || PublicMessage (wire_format 1)
    PublicMessage = FramedContent || FramedContentAuthData || [vl membership_tag if sender is member]
    FramedContent = vl group_id || u64 epoch || Sender || vl authenticated_data || u8 content_type || body
    Sender        = u8 type || (u32 leaf_index if member(1), u32 sender_index if external(2))
    body (commit) = vl proposals || optional<UpdatePath>     (optional = u8 present || value)
    AuthData      = vl signature || (vl confirmation_tag if commit)
    UpdatePath    = LeafNode || vl nodes
    LeafNode      = vl encryption_key || vl signature_key || Credential || Capabilities ||
                    LeafNodeSource || vl extensions || vl signature
    Credential    = u16 type || (vl identity if basic(1), vl certificates if x509(2))
    Capabilities  = 5 x vl (versions, cipher_suites, extensions, proposals, credentials)
    LeafNodeSource= u8 source || (u64 not_before || u64 not_after if key_package(1),
                                  vl parent_hash if commit(3))
    KeyPackage    = u16 version || u16 cipher_suite || vl init_key || LeafNode || vl extensions || vl signature
"""

from __future__ import annotations

import struct

from openab_voice.errors import MlsWireError

_WIRE_PUBLIC_MESSAGE = 1
_SENDER_MEMBER, _SENDER_EXTERNAL = 1, 2
_CONTENT_APPLICATION, _CONTENT_PROPOSAL, _CONTENT_COMMIT = 1, 2, 3
_CREDENTIAL_BASIC, _CREDENTIAL_X509 = 1, 2
_SOURCE_KEY_PACKAGE, _SOURCE_UPDATE, _SOURCE_COMMIT = 1, 2, 3


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise MlsWireError(f"MLS structure truncated at byte {self.at} (wanted {n} more)")
        chunk = self.data[self.at : self.at + n]
        self.at += n
        return chunk

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        value: int = struct.unpack(">H", self.take(2))[0]
        return value

    def u32(self) -> int:
        value: int = struct.unpack(">I", self.take(4))[0]
        return value

    def vl(self) -> bytes:
        first = self.u8()
        prefix = first >> 6
        if prefix == 0:
            n = first & 0x3F
        elif prefix == 1:
            n = ((first & 0x3F) << 8) | self.u8()
        elif prefix == 2:
            n = ((first & 0x3F) << 24) | int.from_bytes(self.take(3), "big")
        else:
            raise MlsWireError("invalid MLS variable-length prefix 0b11")
        return self.take(n)

    def leaf_node(self) -> bytes:
        """Skip a LeafNode; returns the credential identity (basic) or b"" (x509)."""
        self.vl()  # encryption_key
        self.vl()  # signature_key
        identity = self.credential()
        for _ in range(5):  # capabilities
            self.vl()
        source = self.u8()
        if source == _SOURCE_KEY_PACKAGE:
            self.take(16)  # lifetime
        elif source == _SOURCE_COMMIT:
            self.vl()  # parent_hash
        elif source != _SOURCE_UPDATE:
            raise MlsWireError(f"unknown leaf node source {source}")
        self.vl()  # extensions
        self.vl()  # signature
        return identity

    def credential(self) -> bytes:
        kind = self.u16()
        if kind == _CREDENTIAL_BASIC:
            return self.vl()
        if kind == _CREDENTIAL_X509:
            self.vl()
            return b""
        raise MlsWireError(f"unknown credential type {kind}")


def key_package_user_id(key_package: bytes) -> int:
    """The user id in a raw KeyPackage (DAVE: basic credential, 8 bytes big-endian).

    Raises:
        MlsWireError: when the KeyPackage is malformed or its identity is not 8 bytes.
    """
    reader = _Reader(key_package)
    reader.take(4)  # version, cipher_suite
    reader.vl()  # init_key
    identity = reader.leaf_node()
    if len(identity) != 8:
        raise MlsWireError(f"KeyPackage identity is {len(identity)} bytes, not a DAVE user id")
    return int.from_bytes(identity, "big")


def public_message_length(data: bytes) -> int:
    """Bytes taken by the MLSMessage (a PublicMessage) at the start of ``data``.

    Raises:
        MlsWireError: when it is not a well-formed PublicMessage.
    """
    reader = _Reader(data)
    reader.u16()  # version
    if reader.u16() != _WIRE_PUBLIC_MESSAGE:
        raise MlsWireError("not a PublicMessage (DAVE uses the pure-plaintext wire format)")
    reader.vl()  # group_id
    reader.take(8)  # epoch
    sender = reader.u8()
    if sender in (_SENDER_MEMBER, _SENDER_EXTERNAL):
        reader.u32()
    reader.vl()  # authenticated_data
    content = reader.u8()
    if content == _CONTENT_APPLICATION:
        reader.vl()
    elif content == _CONTENT_PROPOSAL:
        raise MlsWireError("proposal messages are not expected from clients")
    elif content == _CONTENT_COMMIT:
        reader.vl()  # proposals
        if reader.u8():  # optional<UpdatePath>
            reader.leaf_node()
            reader.vl()  # nodes
    else:
        raise MlsWireError(f"unknown content type {content}")
    reader.vl()  # signature
    if content == _CONTENT_COMMIT:
        reader.vl()  # confirmation_tag
    if sender == _SENDER_MEMBER:
        reader.vl()  # membership_tag
    return reader.at


def split_commit_welcome(payload: bytes) -> tuple[bytes, bytes | None]:
    """Split an op 28 payload into the commit MLSMessage and the raw Welcome that may follow it.

    Raises:
        MlsWireError: when no well-formed commit starts the payload.
    """
    n = public_message_length(payload)
    welcome = payload[n:]
    return payload[:n], (welcome or None)
