"""The shared lifecycle: every transition, idempotent close, and the guard messages."""

from __future__ import annotations

import pytest

from openab_voice.errors import LifecycleError, OpenabError
from openab_voice.lifecycle import Lifecycle, Phase


def _flags(life: Lifecycle) -> tuple[bool, bool, bool, bool, bool]:
    return life.new, life.running, life.closing, life.closed, life.finished


def test_a_new_lifecycle_is_new_and_a_started_one_is_running() -> None:
    assert Lifecycle("client").phase is Phase.NEW
    assert _flags(Lifecycle("client")) == (True, False, False, False, False)
    assert Lifecycle("client", started=True).phase is Phase.RUNNING


def test_the_full_path_new_running_closing_closed() -> None:
    life = Lifecycle("client")
    phases = [life.phase]
    life.start()
    phases.append(life.phase)
    assert _flags(life) == (False, True, False, False, False)
    assert life.begin_close() is True
    phases.append(life.phase)
    assert _flags(life) == (False, False, True, True, False)
    life.finish_close()
    phases.append(life.phase)
    assert _flags(life) == (False, False, False, True, True)
    assert phases == [Phase.NEW, Phase.RUNNING, Phase.CLOSING, Phase.CLOSED]


@pytest.mark.parametrize("started", [False, True])
def test_close_is_idempotent_only_the_first_caller_wins(started: bool) -> None:
    life = Lifecycle("client", started=started)
    assert life.begin_close() is True
    assert life.begin_close() is False
    life.finish_close()
    assert life.begin_close() is False
    assert life.close_now() is False
    assert life.phase is Phase.CLOSED


def test_close_now_goes_straight_to_closed_once() -> None:
    life = Lifecycle("client")
    assert life.close_now() is True
    assert life.phase is Phase.CLOSED
    assert life.close_now() is False


def test_close_now_finishes_a_close_already_begun_without_winning_it() -> None:
    life = Lifecycle("client", started=True)
    assert life.begin_close() is True
    assert life.close_now() is False
    assert life.phase is Phase.CLOSED


def test_starting_twice_is_an_illegal_transition() -> None:
    life = Lifecycle("client")
    life.start()
    with pytest.raises(LifecycleError) as caught:
        life.start()
    assert caught.value.code == "LIFECYCLE_ILLEGAL_TRANSITION"
    assert caught.value.message == "Cannot start, as the client has already been started."


@pytest.mark.parametrize("finish", [False, True])
def test_starting_after_close_raises_closed(finish: bool) -> None:
    life = Lifecycle("client")
    life.begin_close()
    if finish:
        life.finish_close()
    with pytest.raises(LifecycleError) as caught:
        life.start()
    assert caught.value.code == "LIFECYCLE_CLOSED"
    assert caught.value.message == "Cannot start, as the client has been closed."


@pytest.mark.parametrize("phase", ["new", "running", "closed"])
def test_finish_close_without_a_begun_close_is_illegal(phase: str) -> None:
    life = Lifecycle("client", started=phase == "running")
    if phase == "closed":
        life.close_now()
    with pytest.raises(LifecycleError) as caught:
        life.finish_close()
    assert caught.value.code == "LIFECYCLE_ILLEGAL_TRANSITION"
    assert caught.value.message == f"Cannot finish closing, as the client is {phase}."


def test_require_running_passes_only_while_running() -> None:
    life = Lifecycle("voice session")
    with pytest.raises(LifecycleError) as caught:
        life.require_running("send audio")
    assert caught.value.code == "LIFECYCLE_NOT_STARTED"
    assert caught.value.message == "Cannot send audio, as the voice session has not been started."
    life.start()
    life.require_running("send audio")
    life.begin_close()
    for finish in (False, True):  # closing, then closed
        if finish:
            life.finish_close()
        with pytest.raises(LifecycleError) as caught:
            life.require_running("send audio")
        assert caught.value.code == "LIFECYCLE_CLOSED"
        assert caught.value.message == "Cannot send audio, as the voice session has been closed."


def test_require_open_passes_until_close_begins() -> None:
    life = Lifecycle("bus")
    life.require_open("publish")
    life.start()
    life.require_open("publish")
    life.begin_close()
    with pytest.raises(LifecycleError, match=r"Cannot publish, as the bus has been closed\."):
        life.require_open("publish")


def test_lifecycle_errors_sit_in_the_one_error_tree() -> None:
    life = Lifecycle("client")
    life.close_now()
    with pytest.raises(OpenabError) as caught:
        life.require_running("send a request")
    assert str(caught.value) == "[LIFECYCLE_CLOSED] Cannot send a request, as the client has been closed."
    assert caught.value.retryable is False
    assert "closed" in repr(life)
