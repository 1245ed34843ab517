"""A loopback OpenAI GPT-Live server on 127.0.0.1, built from the ``openai`` package's own types.

Client events are parsed into, and server events built from, ``openai.types.live`` models
(:mod:`~.wire`; the nested Responses stream of a ``response.event`` from ``openai.types.responses``),
so the server cannot drift from the SDK, and an unmodified ``client.live.connect()`` works against
it. The server owns turns as the real one does: an energy VAD over the appended audio (sample time),
STT at the end of each speech (:class:`Listener`), a :class:`LiveResponder` deciding the reply, TTS
(:class:`Voice`) paced on an injected clock (:class:`Pacing`), server barge-in, the three kinds of
appended context, client / Responses / Decisions delegation, fixtures, expiry, and planned
:class:`Faults`. Ears, voice, pacing, VAD and faults are the realtime loopback's
(:mod:`openab_voice.testing.realtime`). Tests read each :class:`LoopbackLiveSession`. Usage:
:mod:`~.server`.

Where the SDK is silent the loopback assumes (check against the real service):

* an unknown model is an ``error`` (``model_not_found``, ``param: "session.model"``) then a 1008
  close, as is any refused ``session.start`` (audio other than ``audio/pcm`` 16/24 kHz, over-long
  instructions or input); a query string on the upgrade is HTTP 400;
* commands before ``session.started`` get ``session_not_started``; a second start
  ``session_already_started``;
* ``mute`` means the model hears silence: a speech in progress ends once the VAD's silence
  (500 ms) has passed on the clock after the mute; audio that just stops arriving is not silence;
* speech while a reply is decided or spoken stops it before its next event (no event says so);
  what it said stays in its context (there is no truncation);
* token limits are counted as four characters a token; over-long appends are
  ``string_above_max_length``; appends and a second fixture while one plays are ``fixture_active``;
* an append's non-null ``delegation_id`` must name a client delegation (``invalid_value``);
* ``response.*`` without Responses delegation is ``responses_delegation_required``; a delegated
  response waiting on tool output sends no ``response.completed`` until it goes on; the backend's
  final text is then voiced;
* Decisions answer every question with a ``refusal``; triggers never fire;
* a planned response failure (``Faults.fail_next_response``) is an ``error`` event instead of a
  reply; ``close_after_responses`` counts replies spoken to their end.
"""

from openab_voice.testing.live.backend import BackendRun
from openab_voice.testing.live.delegation import DelegationRecord
from openab_voice.testing.live.dialogue import TurnRecord
from openab_voice.testing.live.floor import Hearing, Utterance
from openab_voice.testing.live.responder import (
    Appended,
    CallFunction,
    Delegate,
    Line,
    LiveReply,
    LiveResponder,
    LiveTurn,
    ScriptedLiveReply,
    ScriptedLiveResponder,
    Speak,
    echo_responder,
)
from openab_voice.testing.live.server import LIVE_PATH, LoopbackLiveServer
from openab_voice.testing.live.session import LoopbackLiveSession
from openab_voice.testing.live.session_config import KNOWN_MODELS
from openab_voice.testing.live.speaking import Spoken
from openab_voice.testing.realtime.faults import DropRule, Faults, ResponseFailure
from openab_voice.testing.realtime.pacing import Pacing
from openab_voice.testing.realtime.speech import (
    Listener,
    PiperVoice,
    ScriptedListener,
    ToneVoice,
    Voice,
    WhisperListener,
)

__all__ = [
    "KNOWN_MODELS",
    "LIVE_PATH",
    "Appended",
    "BackendRun",
    "CallFunction",
    "Delegate",
    "DelegationRecord",
    "DropRule",
    "Faults",
    "Hearing",
    "Line",
    "Listener",
    "LiveReply",
    "LiveResponder",
    "LiveTurn",
    "LoopbackLiveServer",
    "LoopbackLiveSession",
    "Pacing",
    "PiperVoice",
    "ResponseFailure",
    "ScriptedListener",
    "ScriptedLiveReply",
    "ScriptedLiveResponder",
    "Speak",
    "Spoken",
    "ToneVoice",
    "TurnRecord",
    "Utterance",
    "Voice",
    "WhisperListener",
    "echo_responder",
]
