"""Renders bench/run's measurements as the bench-runner part of bench/RESULTS.md.

Judging columns are paired ratios with intervals (bench/paired.py: the operator's statistics);
absolute medians are context only, since the machine's other work moves them up to 2x between
repeats.
"""
import re
import time
from collections import namedtuple

from harness import ROOT, machine, output
from paired import RATIOS, VERDICT, Diff, Ratio, fmt, median, table

# One case's measurements: runs = {tool: [result per repeat]}; base = the name of the plain case a
# TLS or creds variant ran beside (in the same repeats), else None.
Row = namedtuple("Row", "name n peer subs runs base", defaults=(None,))

CPU_GOAL = 0.33  # runner CPU per message at most 1/3 of the peer's
LIBRARY_SLACK = 1.10  # "where a library comes within 10 %, use the library"
NOTES = "bench/runner-notes.md"  # hand-written: the client decision and the perf profiles


def _lock_version(root, crate):
    m = re.search(rf'name = "{crate}"\nversion = "([^"]+)"', (root / "Cargo.lock").read_text())
    return m.group(1) if m else "?"


def environment(runner_bin, root, in_flight):
    """What the numbers depend on: machine, tool versions, bench-runner build."""
    dirty = " (uncommitted changes)" if output("git", "-C", str(root), "status", "--porcelain", "--",
                                             "bench-runner") else ""
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "nats": output("nats-server", "--version"),
        "mosquitto": output("mosquitto", "-h").split("\n")[0],
        "runner": f"bench-runner {output(str(runner_bin), '--version').split()[-1]} at "
                  f"{output('git', '-C', str(root), 'rev-parse', '--short', 'HEAD')}{dirty}, "
                  f"async-nats {_lock_version(root, 'async-nats')}, rumqttc {_lock_version(root, 'rumqttc')}",
        "in_flight": in_flight,
    }


def _vals(runs, tool, key):
    return [r[key] for r in runs[tool]]


def _throughput_key(subs):
    # With a subscriber the like-for-like figure is end-to-end delivery; else the publish rate.
    return "deliv" if subs else "pub"


def _library_verdict(tput, cpu):
    """Library within 10 % on both: throughput wire ÷ library ≤ 1.1 and CPU wire ÷ library
    ≥ 1/1.1, judged on the whole interval."""
    a, b = tput.at_most(LIBRARY_SLACK), cpu.at_least(1 / LIBRARY_SLACK)
    if a == "met" and b == "met":
        return "within 10 %"
    if "not met" in (a, b):
        return "not within 10 %"
    return "undecided"


def goal_table(rows):
    out = []
    for name, _, peer, subs, runs, _ in rows:
        cw, cl, tw, tl = Ratio.many([(_vals(runs, tool, key), _vals(runs, "peer", key))
                                     for key in ("cpu_per_m", _throughput_key(subs)) for tool in ("wire", "library")])
        out.append([name, peer, cw.cell(), f"**{cw.at_most(CPU_GOAL)}**", cl.cell(), cl.at_most(CPU_GOAL), tw.cell(),
                    tl.cell()])
    return table(["case", "peer", "CPU/msg wire ÷ peer", "CPU goal (wire)", "CPU/msg library ÷ peer",
                  "CPU goal (library)", "throughput wire ÷ peer", "throughput library ÷ peer"], out)


def library_table(rows):
    out = []
    for name, _, _, subs, runs, _ in rows:
        t, c = Ratio.many([(_vals(runs, "wire", key), _vals(runs, "library", key))
                           for key in (_throughput_key(subs), "cpu_per_m")])
        out.append([name, t.cell(), c.cell(), f"**{_library_verdict(t, c)}**"])
    return table(["case", "throughput wire ÷ library", "CPU/msg wire ÷ library", "library"], out)


def medians_table(rows):
    out = []
    for name, _, peer, _, runs, _ in rows:
        for tool in ("wire", "library", "peer"):
            m = {k: median(_vals(runs, tool, k)) for k in ("pub", "deliv", "delivered", "cpu_per_m", "p99")}
            out.append([name, peer if tool == "peer" else f"bench-runner --client {tool}", fmt(m["pub"]),
                        fmt(m["deliv"]), fmt(m["delivered"], 4), fmt(m["cpu_per_m"], 2), fmt(m["p99"])])
    return table(["case", "tool", "pub msg/s", "delivered msg/s", "delivered share", "CPU s/M msgs", "p99 µs"], out)


def variant_table(rows):
    """Each TLS or creds row ÷ its plain row, repeat by repeat (they ran in the same repeats):
    what the variant costs each tool per message, as a ratio and as extra µs of CPU."""
    by_name, out = {r.name: r for r in rows}, []
    for r in rows:
        base = by_name.get(r.base)
        if base is None:
            continue
        k = _throughput_key(r.subs)
        pair = lambda tool, key: (_vals(r.runs, tool, key), _vals(base.runs, tool, key))
        rw_cpu, rw_tput, rl_cpu, rp_cpu, rp_tput = Ratio.many([pair("wire", "cpu_per_m"), pair("wire", k),
                                                               pair("library", "cpu_per_m"),
                                                               pair("peer", "cpu_per_m"), pair("peer", k)])
        dw, dp = Diff.many([pair("wire", "cpu_per_m"), pair("peer", "cpu_per_m")])
        out.append([r.name, base.name] + [x.cell() for x in (rw_cpu, dw, rw_tput, rl_cpu, rp_cpu, dp, rp_tput)])
    return table(["case", "vs", "CPU/msg wire: variant ÷ plain", "extra CPU µs/msg (wire)",
                  "throughput wire: variant ÷ plain", "CPU/msg library: variant ÷ plain", "CPU/msg peer: variant ÷ plain",
                  "extra CPU µs/msg (peer)", "throughput peer: variant ÷ plain"], out) if out else []


def render(rows, repeats, took_s, env):
    lines = [
        "# bench-runner vs the servers' own tools",
        "",
        f"Generated by `make bench` (bench/run) on {env['date']}. Machine: {env['machine']}, shared with the "
        f"servers (and, while this was written, with other builds). {env['nats']}; {env['mosquitto']}; peer tools "
        "nats-bench (nats.go v1.11 example) and the mosquitto_pub/mosquitto_sub of that mosquitto; "
        f"{env['runner']}. bench-runner runs closed loop (no rate: as fast as it can), like the peers.",
        "",
        f"**Every ratio is from this one run.** Each case ran {repeats} repeats; a repeat runs bench-runner on its "
        "hand-written wire path (`--client wire`), the peer tool and bench-runner through the libraries "
        "(`--client library`: async-nats, rumqttc) back to back against the same server, the order rotating per "
        f"repeat. {RATIOS} A case over TLS or with a creds user runs in the same repeats as its plain case, each tool's plain and variant runs next to each other (their order rotating too). "
        f"bench/run's own cases took {took_s / 60:.1f} min.",
        "",
        "CPU/msg = the tool's own user+system CPU seconds (its whole process, from wait4) per message it handled "
        "(sent + received). Throughput = delivered msg/s (first publish → last delivery) where a subscriber "
        "runs, else the publish rate.",
        "",
        f"## Runner CPU per message ≤ {CPU_GOAL} of the peer's",
        "",
        f"{VERDICT} The wire path is the default.",
        "",
    ]
    lines += goal_table(rows)
    variants = variant_table(rows)
    if variants:
        lines += ["", "## Over TLS and with creds ÷ plain (same repeats)", "",
                  "Each variant ÷ its plain case, repeat by repeat: what TLS (or a creds user) costs each tool per "
                  "message. Extra CPU µs/msg = the variant's CPU per message minus the plain case's, per repeat, as "
                  "the mean difference with its 95 % t interval [low–high] and min–max (µs of the tool's CPU per "
                  "message it handled, sent or received; a 1 pub → 1 sub message is handled twice).", ""]
        lines += variants
    lines += ["", "## Hand-written wire path ÷ library (same workload, same run)", "",
              "Throughput above 1 and CPU below 1 favour the wire path. The library is **within 10 %** where the "
              f"whole interval has throughput wire ÷ library ≤ {LIBRARY_SLACK:.2f} and CPU wire ÷ library ≥ "
              f"{1 / LIBRARY_SLACK:.2f}; **not within 10 %** where either interval lies wholly past that.", ""]
    lines += library_table(rows)
    lines += ["", "## Medians (context; judge by the ratios above)", ""]
    lines += medians_table(rows)
    lines += ["", "How to read it:", "",
              "- nats-bench's delivered msg/s is the delivery share of its aggregate `NATS Pub/Sub stats` line "
              "(same end-to-end window as bench-runner's `deliveryRate`); its own `Sub stats` window is half of it.",
              f"- MQTT QoS 1: every tool gets an in-flight window of {env['in_flight']}. mosquitto_pub -l disconnects at "
              "the end of its input with messages still queued, so its pub msg/s counts only PUBLISHes the broker "
              "acknowledged (PUBACKs in its -d log) and its delivered share shows what reached the subscriber; "
              "mosquitto_sub waits for the rest until nothing has arrived for 3 s (at most 60 s).",
              "- The MQTT library path changes only the publisher: subscribers are rumqttc on both paths.",
              "- Over TLS: the servers' certificate (ECDSA P-256, for 127.0.0.1) comes from a throwaway CA made by "
              "openssl for this run; every client verifies it against that CA (bench-runner `--tls-ca-file`, "
              "mosquitto_pub/sub `--cafile`, nats-bench `-tls` with the CA as Go's SSL_CERT_FILE) and negotiates "
              "with its own defaults (TLS 1.3). bench-runner uses rustls (ring) on every path: its wire paths and "
              "rumqttc alike. The MQTT TLS rows use a second listener of the same mosquitto, the NATS one a "
              "nats-server taking TLS beside plain TCP (`allow_non_tls`), the same version as the plain one.",
              "- With creds: a nats-server in operator mode (operator, account and user made by natscli's "
              "`nats auth`, account JWTs preloaded with `resolver: MEMORY`); bench-runner gets the .creds file's "
              "content in MSGBENCH_CREDS, nats-bench its path (`-creds`). Both sign the server's nonce once per "
              "connection: the row shows what that server costs per message once connected, not the "
              "authentication itself.", ""]
    if (ROOT / NOTES).exists():
        lines += [(ROOT / NOTES).read_text().strip(), ""]
    return lines
