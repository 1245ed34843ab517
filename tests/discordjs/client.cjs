// An independent Discord voice client held against the loopback emulator (tests/e2e/test_discordjs_client.py).
//
// discord.js 14 logs in, @discordjs/voice 0.19 joins the voice channel (DAVE through @snazzah/davey when
// asked), records every user's Opus packets after transport and DAVE decryption, and plays Opus packets
// it is given. The Python side decodes the recordings; nothing here decodes or encodes audio.
//
// Usage: node client.cjs CONFIG.json   (CONFIG: token, api, guild_id, channel_id, dave, out_dir)
// stdin, one JSON object a line: {"cmd": "play", "file": PATH} | {"cmd": "status"} | {"cmd": "quit"}
// stdout, one JSON object a line: {"event": ...}. PATH and recordings hold Opus packets, each
// prefixed with its length as a big-endian u16.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const { Readable } = require('node:stream');
const { Client, GatewayIntentBits } = require('discord.js');
const voice = require('@discordjs/voice');

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const emit = (event, fields = {}) => process.stdout.write(`${JSON.stringify({ event, ...fields })}\n`);

const recordings = new Map(); // user id -> { fd, packets, bytes, errors }
const state = { closes: [], states: [], transitions: [], debug: [], resumed: 0, errors: [] };

function record(userId) {
  let rec = recordings.get(userId);
  if (rec === undefined) {
    const file = path.join(config.out_dir, `${userId}.opus`);
    rec = { file, fd: fs.openSync(file, 'w'), packets: 0, bytes: 0, errors: 0 };
    recordings.set(userId, rec);
  }
  return rec;
}

function subscribe(connection, userId) {
  const rec = record(userId);
  if (connection.receiver.subscriptions.has(userId)) return;
  const stream = connection.receiver.subscribe(userId, { end: { behavior: voice.EndBehaviorType.Manual } });
  stream.on('data', (packet) => {
    const prefix = Buffer.alloc(2);
    prefix.writeUInt16BE(packet.length);
    fs.writeSync(rec.fd, Buffer.concat([prefix, packet]));
    rec.packets += 1;
    rec.bytes += packet.length;
  });
  // A packet that fails to decrypt destroys the subscription; count it and listen again.
  stream.on('error', (error) => {
    rec.errors += 1;
    state.errors.push(`receive ${userId}: ${error.message}`);
  });
  stream.on('close', () => setImmediate(() => subscribe(connection, userId)));
}

function opusPackets(file) {
  const data = fs.readFileSync(file);
  const packets = [];
  for (let i = 0; i + 2 <= data.length; ) {
    const n = data.readUInt16BE(i);
    packets.push(data.subarray(i + 2, i + 2 + n));
    i += 2 + n;
  }
  return packets;
}

function networking(connection) {
  const s = connection.state;
  return s.networking ? s.networking.state : undefined;
}

function describe(connection) {
  const net = networking(connection);
  const data = net && net.connectionData;
  return {
    status: connection.state.status,
    networking: net ? net.code : null,
    mode: data ? data.encryptionMode : null,
    ssrc: data ? data.ssrc : null,
    dave_version: net && net.dave ? net.dave.protocolVersion : 0,
    privacy_code: net && net.dave ? net.dave.voicePrivacyCode : null,
    dave_users: net && net.dave && net.dave.session ? (net.dave.session.getUserIds() || []).map(String) : [],
    connected_clients: data && data.connectedClients ? [...data.connectedClients] : [],
    recordings: Object.fromEntries(
      [...recordings].map(([id, r]) => [id, { file: r.file, packets: r.packets, bytes: r.bytes, errors: r.errors }]),
    ),
    closes: state.closes,
    resumed: state.resumed,
    transitions: state.transitions,
    errors: state.errors,
  };
}

async function main() {
  const client = new Client({
    intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildVoiceStates],
    rest: { api: config.api },
  });
  client.on('error', (error) => state.errors.push(`client: ${error.message}`));
  await client.login(config.token);
  await new Promise((resolve) => (client.isReady() ? resolve() : client.once('clientReady', resolve)));
  const guild = await client.guilds.fetch(config.guild_id);
  emit('logged_in', { user: client.user.id });

  const connection = voice.joinVoiceChannel({
    channelId: config.channel_id,
    guildId: config.guild_id,
    adapterCreator: guild.voiceAdapterCreator,
    selfDeaf: false,
    daveEncryption: config.dave,
    debug: true,
  });
  connection.on('error', (error) => state.errors.push(`connection: ${error.message}`));
  connection.on('debug', (message) => {
    // The networking layer reports closes and resumes only through debug lines.
    if (/close|resum/i.test(message) && !/heartbeat/i.test(message)) state.debug.push(message.slice(0, 300));
  });
  connection.on('stateChange', (oldState, newState) => {
    state.states.push(newState.status);
    const oldNet = oldState.networking;
    const newNet = newState.networking;
    if (newNet && oldNet !== newNet) watchNetworking(newNet);
  });
  function watchNetworking(net) {
    net.on('stateChange', (oldNs, newNs) => {
      if (oldNs.code === voice.NetworkingStatusCode.Resuming && newNs.code === voice.NetworkingStatusCode.Ready) {
        state.resumed += 1;
        emit('resumed', describe(connection));
      }
    });
    net.on('close', (code) => state.closes.push(code));
    net.on('transitioned', (id) => state.transitions.push(id));
  }
  if (connection.state.networking) watchNetworking(connection.state.networking);

  connection.receiver.ssrcMap.on('create', (data) => subscribe(connection, data.userId));
  await voice.entersState(connection, voice.VoiceConnectionStatus.Ready, 20_000);
  if (config.dave) {
    // Ready comes with SESSION_DESCRIPTION; the DAVE welcome follows it.
    const deadline = Date.now() + 20_000;
    while (!(networking(connection) && networking(connection).dave && networking(connection).dave.session?.ready)) {
      if (Date.now() > deadline) throw new Error('the DAVE session never became ready');
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  emit('voice_ready', describe(connection));

  const player = voice.createAudioPlayer({ behaviors: { noSubscriber: voice.NoSubscriberBehavior.Play } });
  connection.subscribe(player);
  player.on('error', (error) => state.errors.push(`player: ${error.message}`));

  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const command = JSON.parse(line);
    if (command.cmd === 'play') {
      const resource = voice.createAudioResource(Readable.from(opusPackets(command.file)), {
        inputType: voice.StreamType.Opus,
      });
      player.play(resource);
      await voice.entersState(player, voice.AudioPlayerStatus.Playing, 10_000);
      await voice.entersState(player, voice.AudioPlayerStatus.Idle, 60_000);
      emit('played', describe(connection));
    } else if (command.cmd === 'status') {
      emit('status', describe(connection));
    } else if (command.cmd === 'quit') {
      break;
    }
  }
  const final = describe(connection);
  for (const rec of recordings.values()) fs.closeSync(rec.fd);
  connection.destroy();
  await client.destroy();
  emit('bye', { ...final, debug: state.debug.slice(-40) });
}

main().then(
  () => process.exit(0),
  (error) => {
    emit('failed', { error: String(error && error.stack ? error.stack : error), errors: state.errors, debug: state.debug.slice(-40) });
    process.exit(1);
  },
);
