"""Socket.IO subscriber driven by the integration tests, built on python-socketio's client.

Connects over WebSocket, subscribes (with an acknowledgement), prints `READY` once the server has
acknowledged, then one JSON line per received `message`, in arrival order. Exits 0 after --expect
messages, 2 on timeout. With --hold it stays connected until stdin closes. With --consume it
acknowledges each message with the `consumed` event.

The asyncio client is used on purpose: the threaded client runs every event handler on a new
thread, which reorders messages on the client side and would hide (or fake) ordering bugs.
"""
import argparse
import asyncio
import json
import sys

import socketio


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--subscribe", action="append", default=[], help="topic (repeatable)")
    ap.add_argument("--expect", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--consume", action="store_true")
    ap.add_argument("--hold", action="store_true", help="stay connected until stdin closes")
    args = ap.parse_args()

    sio = socketio.AsyncClient(reconnection=False)
    received = 0
    done = asyncio.Event()

    @sio.on("message")
    async def on_message(msg):
        nonlocal received
        # Print before any await: tasks start in arrival order, so lines keep that order.
        print(json.dumps(msg), flush=True)
        received += 1
        if received >= args.expect:
            done.set()
        if args.consume:
            await sio.emit("consumed", {"id": msg["id"]})

    await sio.connect(args.url, transports=["websocket"], wait_timeout=args.timeout)
    topics = args.subscribe[0] if len(args.subscribe) == 1 else args.subscribe
    ack = await sio.call("subscribe", topics, timeout=args.timeout)
    if not (isinstance(ack, dict) and ack.get("ok") is True):
        print(f"subscribe not acknowledged: {ack!r}", file=sys.stderr)
        return 3
    print("READY", flush=True)
    if args.expect == 0:
        done.set()
    try:
        await asyncio.wait_for(done.wait(), args.timeout)
        ok = True
    except asyncio.TimeoutError:
        ok = False
    if args.hold:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await sio.disconnect()
    if not ok:
        print(f"timeout: received {received} of {args.expect}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
