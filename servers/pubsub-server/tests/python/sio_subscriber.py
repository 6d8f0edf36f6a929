"""Socket.IO subscriber driven by the integration tests, built on python-socketio's client.

Connects over WebSocket, subscribes (with an acknowledgement), prints `READY` once the server has
acknowledged, then one JSON line per received `message`. Exits 0 after --expect messages, 2 on
timeout. With --consume it acknowledges each message with the `consumed` event.
"""
import argparse
import json
import sys
import threading

import socketio


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--subscribe", action="append", default=[], help="topic (repeatable)")
    ap.add_argument("--expect", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--consume", action="store_true")
    args = ap.parse_args()

    sio = socketio.Client(reconnection=False)
    received = 0
    done = threading.Event()

    @sio.on("message")
    def on_message(msg):
        nonlocal received
        print(json.dumps(msg), flush=True)
        if args.consume:
            sio.emit("consumed", {"id": msg["id"]})
        received += 1
        if received >= args.expect:
            done.set()

    sio.connect(args.url, transports=["websocket"], wait_timeout=args.timeout)
    topics = args.subscribe[0] if len(args.subscribe) == 1 else args.subscribe
    ack = sio.call("subscribe", topics, timeout=args.timeout)
    if not (isinstance(ack, dict) and ack.get("ok") is True):
        print(f"subscribe not acknowledged: {ack!r}", file=sys.stderr)
        return 3
    print("READY", flush=True)
    if args.expect == 0:
        done.set()
    ok = done.wait(args.timeout)
    # Give `consumed` emits a moment to flush before the socket closes.
    sio.sleep(0.2) if args.consume else None
    sio.disconnect()
    if not ok:
        print(f"timeout: received {received} of {args.expect}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
