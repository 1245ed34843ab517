"""Discord's wire half: our per-speaker receiver hooked into discord.py's voice client (UDP inbox,
transport and DAVE decryption, jitter buffer, Opus FEC/PLC, keep-alive), playback with interrupt and
the render-reference tap, voice-connection life and gaps, and the events they publish. It knows
neither the planes (engine, actions, acp, memory, store, tools) nor the host half."""
