"""What memory never saves: credentials, tokens, payment data and private identifiers.

:func:`refusal` returns why a text must not be saved, in words the model (and the speaker) can hear,
or None. It errs on the side of refusing: a saved secret would be offered back to the model in
later turns, read aloud, and kept in the database. Checked on every save, the tool's and the spoken
"remember that" alike.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["refusal"]

_CREDENTIAL: Final = re.compile(
    r"(sk-[A-Za-z0-9_-]{12,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{30,}|bearer\s+\S{12,}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----)",
    re.I,
)
# "my password is hunter2", "the api key: abc123", "pin code 4321"
_SECRET_WORDS: Final = re.compile(
    r"\b(pass ?words?|passphrase|api[ _-]?keys?|access[ _-]?keys?|secret[ _-]?keys?|auth(entication)? tokens?"
    r"|tokens?|private keys?|pin( code)?|one[- ]time (code|password)|otp|2fa code|recovery (code|phrase)"
    r"|seed phrase|credentials?)\b\s*(is|are|=|:|was)\s*\S+",
    re.I,
)
_OPAQUE: Final = re.compile(r"\b(?=[A-Za-z0-9+/_-]*\d)(?=[A-Za-z0-9+/_-]*[A-Za-z])[A-Za-z0-9+/_-]{32,}={0,2}")
_CARD: Final = re.compile(r"\b(?:\d[ -]?){13,19}\b")
_CVV: Final = re.compile(r"\b(cvv|cvc|security code)\b\W{0,3}\d{3,4}\b", re.I)
_IBAN: Final = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){3,7}(?: ?[A-Z0-9]{1,4})?\b")
_SSN: Final = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")
_PRIVATE_ID: Final = re.compile(
    r"\b(social security|passport|driver'?s licen[cs]e|national (id|insurance)|tax id|bank account)"
    r"( number| no\.?)?\b\s*(is|:|=)?\s*[A-Z0-9][A-Z0-9 -]{4,}",
    re.I,
)


def refusal(text: str) -> str | None:
    """Why ``text`` must not be saved, or None."""
    if _CREDENTIAL.search(text) or _SECRET_WORDS.search(text) or _OPAQUE.search(text):
        return "it looks like a password, key or token; credentials are never saved"
    if _CVV.search(text) or any(_luhn(m.group()) for m in _CARD.finditer(text)) or _IBAN.search(text):
        return "it looks like payment data (a card or bank account number); that is never saved"
    if _SSN.search(text) or _PRIVATE_ID.search(text):
        return "it looks like a private identifier (an ID, passport or account number); that is never saved"
    return None


def _luhn(candidate: str) -> bool:
    digits = [int(c) for c in candidate if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            d -= 9 if d > 9 else 0
        total += d
    return total % 10 == 0
