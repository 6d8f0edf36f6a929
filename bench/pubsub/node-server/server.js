'use strict';
// Canonical Node socket.io server speaking the msgbench PubSub wire protocol, so the reference
// Rust pubsub-server can be benchmarked against the stock implementation of the same contract.
//   POST /publish {"topic": string, "payload": any, "publisher": string?} -> 200 {"id": n}
//   Socket.IO: `subscribe` / `unsubscribe` (string or array of strings, optional ack {"ok":true}),
//   room `__all__` receives every publish, server emits `message`, client may emit `consumed`.
// Deliberately idiomatic (no clustering, no tuning): it is the baseline, not a competitor.
const http = require('http');
const { Server } = require('socket.io');

const WILDCARD = '__all__';
const MAX_BODY = 1 << 20;
const MAX_TOPIC = 256;
const port = Number(process.argv[2] || process.env.PORT || 8080);
const host = process.env.HOST || '127.0.0.1';

let nextId = 1;
let published = 0;
let consumed = 0;
const started = Date.now();

function send(res, status, body) {
  const data = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
  res.end(data);
}

function validate(msg) {
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return 'body: must be a JSON object';
  if (typeof msg.topic !== 'string' || msg.topic.length === 0) return 'topic: must be a non-empty string';
  if (msg.topic.length > MAX_TOPIC) return `topic: must be at most ${MAX_TOPIC} characters`;
  if (!('payload' in msg)) return 'payload: is required';
  if (msg.publisher !== undefined && msg.publisher !== null && typeof msg.publisher !== 'string') {
    return 'publisher: must be a string or null';
  }
  return null;
}

function publish(req, res) {
  const chunks = [];
  let size = 0;
  req.on('data', (c) => {
    size += c.length;
    if (size > MAX_BODY) { send(res, 413, { error: `body: larger than ${MAX_BODY} bytes` }); req.destroy(); return; }
    chunks.push(c);
  });
  req.on('end', () => {
    if (res.writableEnded) return;
    let msg;
    try { msg = JSON.parse(Buffer.concat(chunks).toString('utf8')); } catch (e) {
      return send(res, 400, { error: `body: invalid JSON (${e.message})` });
    }
    const err = validate(msg);
    if (err) return send(res, 400, { error: err });
    const id = nextId++;
    const out = { id, topic: msg.topic, payload: msg.payload, publisher: msg.publisher ?? null, timestamp: Date.now() };
    // One emit to the union of both rooms: each socket gets the message once.
    io.to(msg.topic).to(WILDCARD).emit('message', out);
    published++;
    send(res, 200, { id });
  });
}

const server = http.createServer((req, res) => {
  const path = req.url.split('?')[0];
  if (req.method === 'POST' && path === '/publish') return publish(req, res);
  if (req.method === 'GET' && path === '/health') {
    return send(res, 200, {
      status: 'ok', implementation: 'node-socket.io', uptime_seconds: (Date.now() - started) / 1000,
      rss_bytes: process.memoryUsage().rss, clients: io.engine.clientsCount, published, consumed,
    });
  }
  // socket.io attaches its own 'request' listener for /socket.io/; answer everything else.
  if (!path.startsWith('/socket.io/')) send(res, 404, { error: `path: no route ${req.method} ${path}` });
});

const io = new Server(server, { serveClient: false, cors: { origin: '*' } });

function topicsOf(arg) {
  const list = Array.isArray(arg) ? arg : [arg];
  return list.filter((t) => typeof t === 'string' && t.length > 0 && t.length <= MAX_TOPIC);
}

io.on('connection', (socket) => {
  socket.on('subscribe', (arg, ack) => {
    const topics = topicsOf(arg);
    socket.join(topics);
    if (typeof ack === 'function') ack(topics.length ? { ok: true } : { ok: false, error: 'topic: must be a non-empty string or array of strings' });
  });
  socket.on('unsubscribe', (arg, ack) => {
    for (const t of topicsOf(arg)) socket.leave(t);
    if (typeof ack === 'function') ack({ ok: true });
  });
  socket.on('consumed', () => { consumed++; });
});

server.listen(port, host, () => {
  console.log(`node socket.io harness listening on http://${host}:${server.address().port}`);
});

function shutdown() { io.close(); server.close(() => process.exit(0)); setTimeout(() => process.exit(0), 2000).unref(); }
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
