"""Discord voice I/O on an unmodified discord.py: the bot client and ``/voice`` commands, our own
per-speaker receiver (transport + DAVE decryption, jitter buffer, Opus FEC/PLC), playback with
interrupt and render-reference tap, and one :class:`~openab_voice.discord.session.VoiceSession` per
joined channel that wires them to the audio front end and the conversation."""
