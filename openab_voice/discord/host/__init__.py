"""Discord's host half: the client and its ``/voice`` commands, the control text channel, the voice
channel status, and one :class:`~openab_voice.discord.host.session.VoiceSession` per joined channel,
which connects and closes the parts the composition root (:mod:`openab_voice.app`) built for it."""
