"""The error tree's codes: one :class:`ErrorCode` member per code, and every error class in errors.py."""

from __future__ import annotations

import ast
import builtins
import json
from pathlib import Path

import openab_voice
from openab_voice import errors
from openab_voice.errors import ErrorCode, OpenabError

PACKAGE = Path(openab_voice.__file__).parent
# Control-flow signals that never leave their module (each says so where it is defined).
LOCAL_SIGNALS = {"_Expired", "_Withdrawn", "ClaimCut", "_Cancelled"}


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_every_member_is_named_by_its_value() -> None:
    assert [m.name for m in ErrorCode] == [m.value for m in ErrorCode]


def test_every_error_class_has_a_member_as_its_code() -> None:
    classes = {OpenabError} | _subclasses(OpenabError)
    assert errors.ProviderRequestFailed in classes and errors.UnknownHostError in classes
    for cls in classes:
        assert isinstance(cls.code, ErrorCode), cls


def test_a_code_reads_as_its_plain_string() -> None:
    code = ErrorCode.TOOL_UNKNOWN
    assert code == "TOOL_UNKNOWN" and str(code) == "TOOL_UNKNOWN" and f"{code}" == "TOOL_UNKNOWN"
    assert json.dumps({code: code}) == '{"TOOL_UNKNOWN": "TOOL_UNKNOWN"}'
    assert str(OpenabError("boom", code=code)) == "[TOOL_UNKNOWN] boom"


def test_exception_classes_are_defined_only_in_errors_py() -> None:
    exception_names = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    exception_names |= {
        n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)
    }
    strays = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name not in LOCAL_SIGNALS:
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if bases & exception_names:
                    strays.append(f"{path.relative_to(PACKAGE)}: {node.name}")
    assert strays == []
