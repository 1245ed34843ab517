"""Discord on an unmodified discord.py, as wire and host adapters only.

The wire half: our own per-speaker receiver hooked into discord.py's voice client (transport + DAVE
decryption, jitter buffer, Opus FEC/PLC), playback with interrupt and render-reference tap. The host
half: the client and its ``/voice`` commands, the control text channel, and one
:class:`~openab_voice.discord.host.session.VoiceSession` per joined channel, which connects and closes the
parts the composition root (:mod:`openab_voice.app`) built for it. Nothing here builds an audio,
engine, tool or action object."""
