"""The demo's HTML report: rendered by a real browser (Debian's headless Chromium), and written by the CLI."""

from __future__ import annotations

import html
import json
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from openab_voice.cli import main
from openab_voice.report.page import write_html
from tests.fakes.demo_report import demo_report

pytestmark = pytest.mark.e2e

CHROMIUM = "/usr/bin/chromium"  # scripts/setup.sh installs Debian's package
WIDTH, HEIGHT = 1280, 2600
# Root in a container: no sandbox; nothing in the page or the browser may reach the network.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    f"--window-size={WIDTH},{HEIGHT}",
]


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert Path(CHROMIUM).exists(), (
        "chromium is missing: scripts/setup.sh installs it (apt-get install chromium)"
    )
    with tempfile.TemporaryDirectory(prefix="openab-chromium-") as profile:
        return subprocess.run(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=90,
            check=True,
        )


def test_the_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    page = write_html(demo_report(), tmp_path / "report.html", bot_name="Jarvis")
    dom = chromium("--dump-dom", page.as_uri()).stdout
    # The DOM the browser built (not our file): both charts are SVG, each lane and histogram is there.
    assert dom.count("<svg") == 2
    for element in (
        "timeline-chart",
        "timeline-1001",
        "timeline-1002",
        "timeline-bot",
        "timeline-actions",
        "latency-chart",
        "latency-barge_in_ms",
        "latency-first_stable_partial_ms",
        "latency-eou_to_first_audio_ms",
        "latency-tts_first_chunk_ms",
        "conversation",
        "text-channel",
    ):
        assert f'id="{element}"' in dom, element
    assert "Jarvis, what is the capital of France?" in dom and "12345 67890 13579" in dom

    shot = tmp_path / "report.png"
    chromium(f"--screenshot={shot}", page.as_uri())
    pixels = image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    rgb = np.round(pixels * 255).astype(np.int32)
    assert (rgb < 245).any(axis=-1).mean() > 0.05, "the page is (nearly) blank"

    def share(hex_color: str) -> float:
        want = [int(hex_color[i : i + 2], 16) for i in (1, 3, 5)]
        return float((np.abs(rgb - want).max(axis=-1) <= 8).mean())

    # The charts were drawn, not just the text: speech bars (blue), a turn for the bot (orange),
    # the bot's speaking state (green) cover visible areas.
    assert share("#0072B2") > 0.002 and share("#E69F00") > 0.0005 and share("#009E73") > 0.0005


def test_demo_writes_the_html_beside_the_json(tmp_path: Path) -> None:
    clips = tmp_path / "clips"
    clips.mkdir()
    shutil.copy(Path(str(resources.files("openab_voice.testing") / "assets" / "alice.wav")), clips / "a.wav")
    scenario = tmp_path / "scenario.json"
    scenario.write_text(
        json.dumps(
            {
                "dave": True,
                "loss": 0.0,
                "until": 4.2,
                "dialogue": False,
                "speakers": [{"id": "1001", "name": "alice", "audio": [{"at": 0.3, "file": "clips/a.wav"}]}],
            }
        )
    )
    out = tmp_path / "out" / "report.json"
    assert main(["demo", "--scenario", str(scenario), "--report", str(out)]) == 0
    report = json.loads(out.read_text())
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert report["speech"] and all(s["speaker"] == "1001" for s in report["speech"])
    assert 'id="timeline-1001"' in page and 'id="latency-chart"' in page and ">alice</td>" in page
    # Whether the final made it before the end depends on the machine's load; what did is on the page.
    assert all(html.escape(t["text"]) in page for t in report["transcripts"])
