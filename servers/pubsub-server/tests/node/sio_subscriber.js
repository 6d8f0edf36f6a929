'use strict';
// Socket.IO subscriber driven by the integration tests, built on the official socket.io-client.
// Same command line and output as ../python/sio_subscriber.py: connects over WebSocket,
// subscribes (with an acknowledgement), prints `READY` once acknowledged, then one JSON line per
// received `message` in arrival order. Exits 0 after --expect messages, 2 on timeout, 3 when the
// subscription is refused. With --hold it stays connected until stdin closes; with --consume it
// acknowledges each message with the `consumed` event.
const { io } = require('socket.io-client');

function parseArgs(argv) {
  const a = { subscribe: [], timeout: 20, consume: false, hold: false };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--url') a.url = argv[++i];
    else if (k === '--subscribe') a.subscribe.push(argv[++i]);
    else if (k === '--expect') a.expect = Number(argv[++i]);
    else if (k === '--timeout') a.timeout = Number(argv[++i]);
    else if (k === '--consume') a.consume = true;
    else if (k === '--hold') a.hold = true;
    else { console.error(`unknown argument ${k}`); process.exit(64); }
  }
  if (!a.url || !Number.isInteger(a.expect)) { console.error('--url and --expect are required'); process.exit(64); }
  return a;
}

const args = parseArgs(process.argv.slice(2));
const socket = io(args.url, { transports: ['websocket'], reconnection: false, timeout: args.timeout * 1000 });
let received = 0;
let finished = false;
const out = (line) => process.stdout.write(line + '\n');

function finish(code) {
  if (finished) return;
  finished = true;
  clearTimeout(timer);
  const done = () => { socket.disconnect(); process.exitCode = code; if (code !== 0) console.error(`timeout: received ${received} of ${args.expect}`); };
  if (args.hold) { process.stdin.resume(); process.stdin.on('end', done); process.stdin.on('close', done); } else done();
}

const timer = setTimeout(() => finish(2), args.timeout * 1000);
socket.on('connect_error', (e) => { console.error(`connect_error: ${e.message}`); process.exit(1); });
socket.on('message', (msg) => {
  out(JSON.stringify(msg));
  received++;
  if (args.consume) socket.emit('consumed', { id: msg.id });
  if (received >= args.expect) finish(0);
});
socket.on('connect', () => {
  const topics = args.subscribe.length === 1 ? args.subscribe[0] : args.subscribe;
  socket.timeout(args.timeout * 1000).emit('subscribe', topics, (err, ack) => {
    if (err || !ack || ack.ok !== true) { console.error(`subscribe not acknowledged: ${err || JSON.stringify(ack)}`); process.exit(3); }
    out('READY');
    if (args.expect === 0) finish(0);
  });
});
