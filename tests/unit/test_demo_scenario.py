"""A scenario line's inline pauses: the parts said around each ``<pause S>`` and the silence between."""

from __future__ import annotations

from openab_voice.demo.scenario import split_pauses


def test_a_pause_splits_a_line_into_the_parts_said_around_it() -> None:
    assert split_pauses("Jarvis, what is the capital of <pause 0.8> France?") == [
        ("Jarvis, what is the capital of", 0.8),
        ("France?", 0.0),
    ]
    assert split_pauses("one <pause 1> two <pause 0.25> three") == [
        ("one", 1.0),
        ("two", 0.25),
        ("three", 0.0),
    ]
    assert split_pauses("No pause here.") == [("No pause here.", 0.0)]
    assert split_pauses("<pause 2> late start") == [("late start", 0.0)]  # nothing said before it
