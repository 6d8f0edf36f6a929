"""Markdown for bench/pubsub/run: per-server medians over the paired repeats, and pubsub-server ÷ Node
(and parallel ÷ sequential) ratios from the same run, with bench/paired.py's statistics.

`cases` is a list of (case name, closed loop?, {server name: [run per repeat]}); the lists of one
case are aligned by repeat (repeat k ran every server back to back), which is what pairs them.
A run is the dict bench/pubsub/run's run_case returns.
"""
from harness import FIGURES
from paired import RATIOS, VERDICT, cell, fmt, median, ms, ratios, table

DELIVERED_GOAL = 3.0  # closed loop: pubsub-server delivers ≥ 3× Node's msg/s at each one's ceiling
P99_GOAL = 1 / 3  # open loop beyond Node's ceiling: pubsub-server's p99 ≤ 1/3 of Node's


def reason_kind(reason):
    """One of bench-runner's saturation reasons ("runner 7: send lag p99 …", "runner 7: sent 1 of 2
    scheduled messages", "runner 7: CPU 97% of 1 CPUs") as 'send lag', 'unsent' or 'generator CPU'."""
    text = reason.split(": ", 1)[-1]
    for prefix, kind in (("send lag", "send lag"), ("sent ", "unsent"), ("CPU", "generator CPU")):
        if text.startswith(prefix):
            return kind
    return text


def saturation(runs):
    """(repeats, numbered from 1, whose generator reported saturation; their reason kinds, first seen first)."""
    return ([i + 1 for i, r in enumerate(runs) if r["saturated"]],
            list(dict.fromkeys(reason_kind(x) for r in runs for x in r.get("reasons", []))))


def saturation_text(runs):
    """'ok (0 of 5)' or 'saturated in 1, 3 of 5: send lag, unsent'."""
    reps, kinds = saturation(runs)
    return f"saturated in {', '.join(map(str, reps))} of {len(runs)}: {', '.join(kinds)}" if reps else \
        f"ok (0 of {len(runs)})"


def saturation_mark(per, names):
    """The ratio tables' generator column for the servers `names` of one case: 'none', or a bold ⚠
    with which server's repeats were saturated and why."""
    parts = []
    for n in names:
        reps, kinds = saturation(per[n])
        if reps:
            parts.append(f"{n} in {', '.join(map(str, reps))} ({', '.join(kinds)})")
    return "none" if not parts else "**⚠** " + "; ".join(parts)


def vals(runs, key):
    return [r[key] for r in runs]


def goal(closed, per, node, rs):
    """The old goals, judged on the whole interval (paired.Ratio.at_least/at_most): closed loop,
    delivered ≥ 3× Node's; open loop where Node fell behind, p99 ≤ 1/3 of Node's. Where Node kept up
    in every repeat both p99s sit at the machine's floor: a reference, not claimed."""
    if closed:
        return f"delivered ≥ {DELIVERED_GOAL:g}×: **{rs['delivered'].at_least(DELIVERED_GOAL)}**"
    n = per[node]
    if not any(r["saturated"] for r in n) and min(r["ratio"] for r in n) >= 0.999:
        return "reference (Node kept up; not claimed)"
    return f"p99 ≤ 0.33×: **{rs['p99'].at_most(P99_GOAL)}**"


def medians_table(cases, servers):
    def row(cname, s, rs):
        m = {k: median(vals(rs, k)) for k in ("delivered", "pub", "p50", "p99", "cpu_per_m", "peak", "gen_busy", "rss")}
        drops = [r["drops"] for r in rs]
        return [cname, s, fmt(m["delivered"]), fmt(min(vals(rs, "ratio")), 4), fmt(m["pub"]), ms(m["p50"]),
                ms(m["p99"]), fmt(m["cpu_per_m"], 1), fmt(m["peak"], 2), fmt(m["gen_busy"], 2),
                fmt(None if m["rss"] is None else m["rss"] / 2**20, 1),
                "n/a (unbounded)" if all(d is None for d in drops) else fmt(sum(d or 0 for d in drops)),
                saturation_text(rs)]
    return table(["case", "server", "delivered msg/s", "delivered ratio (min)", "publish/s", "p50 ms", "p99 ms",
                  "server CPU s/M", "server cores busy", "generator cores busy", "peak RSS MB (since start)",
                  "slow-subscriber drops (all repeats)", "generator"],
                 [row(cname, s, per[s]) for cname, _, per in cases for s in servers])


def ratio_cells(per, ours, theirs):
    rs = ratios(per, ours, theirs)
    return [cell(rs["cpu_per_m"]), cell(rs["delivered"]), cell(rs["p99"])], rs


def vs_node_table(cases, node, others):
    rows = []
    for cname, closed, per in cases:
        for s in others:
            cells, rs = ratio_cells(per, s, node)
            rows.append([cname, f"{s} ÷ Node", *cells, goal(closed, per, node, rs), saturation_mark(per, (node, s))])
    return table(["case", "ratio", "server CPU s/M", "delivered msg/s", "p99", "goal", "generator saturated (repeats)"],
                 rows)


def par_seq_table(cases, par, seq):
    return table(["case", "server CPU s/M", "delivered msg/s", "p99", "generator saturated (repeats)"],
                 [[cname, *ratio_cells(per, par, seq)[0], saturation_mark(per, (par, seq))] for cname, _, per in cases])


def not_a_ceiling(cases, workers):
    """Closed-loop cases where no server kept 0.9 × its worker threads busy (median over repeats)."""
    return [c for c, closed, per in cases if closed
            and max(median(vals(rs, "peak")) or 0 for rs in per.values()) < 0.9 * workers]


def render(cases, servers, m):
    """The whole RESULTS.md. `servers` = (Node, parallel, sequential) names; `m` = the run's settings:
    started, machine, took_s, repeats, placement, node_version, workers, socket_buffer, seconds, fanout."""
    node, par, seq = servers
    lines = [
        "# pubsub-server vs the canonical Node socket.io server",
        "",
        f"Generated by `bench/pubsub/run`, started {m['started']}, on {m['machine']}; it took "
        f"{m['took_s'] / 60:.1f} min. **Every number and ratio below is from this one run.** Same CPU budget: one CPU "
        f"per server ({m['placement']}; other work on the machine still shares the CPUs, which is why the judging is "
        f"done by paired, same-run ratios). Node {m['node_version']} (single-threaded); pubsub-server release build "
        f"with WORKER_THREADS={m['workers']} and SOCKET_BUFFER={m['socket_buffer']} packets per subscriber (Node's "
        "buffers are unbounded). Load generator: **bench-runner** (`protocol: socketio`; HTTP POST /publish "
        "pipelined over 4 keep-alive connections per publisher with at most 512 requests in flight, Engine.IO v4 "
        f"WebSocket subscribers); 64 B payloads; {m['seconds']} s measured after 2 s warm-up. Fan-out: every publish "
        f"reaches all {m['fanout']} subscribers, so the server's work dominates the generator's.",
        "",
        f"**{m['repeats']} paired repeats.** Each repeat ran every case against the three servers back to back, the "
        "servers' order rotating per repeat (Node, parallel, sequential; then parallel, sequential, Node; …), so a "
        "moment of the machine's other work hits the servers of one repeat alike and cancels in that repeat's "
        f"ratio. {RATIOS} Absolute figures are medians over the repeats, for context.",
        "",
        FIGURES,
        "",
        f"## Medians over {m['repeats']} repeats (context; judge by the ratios below)",
        "",
    ]
    lines += medians_table(cases, servers)
    lines += [
        "",
        "## pubsub-server ÷ Node, same run",
        "",
        "Lower is better for server CPU s/M and p99, higher for delivered msg/s: 0.10× CPU is a tenth of Node's "
        "CPU per delivery, 3× delivered is three times Node's rate. Goals: delivered ≥ 3× Node's at each server's "
        f"ceiling (closed loop); p99 ≤ 1/3 of Node's at the same offered rate beyond Node's ceiling (open loop). {VERDICT}",
        "",
    ]
    lines += vs_node_table(cases, node, (par, seq))
    lines += [
        "",
        "**⚠** marks a case where bench-runner reported its generator saturated in some repeat (listed per "
        "server). With *generator CPU* the generator set the pace, so that repeat's ratio measures the generator, "
        "not the server. *Send lag* or *unsent* with the generator's CPU far from busy is the server's back "
        "pressure: a server that cannot keep up answers publishes late, the generator's window of 512 requests "
        "in flight fills and publishes go out late or not at all, which the latency counts because it is "
        "measured from the intended send time.",
        "",
        "## Parallel ÷ sequential emission, same run",
        "",
        "pubsub-server's EMIT_MODE=parallel ÷ EMIT_MODE=sequential; as above, lower is better for CPU and p99, "
        "higher for delivered.",
        "",
    ]
    lines += par_seq_table(cases, par, seq)
    lines += ["", "Open loop: every server is offered the same publish rate; delivered msg/s cannot exceed the offered "
              "rate, so there the comparison is latency (and whether all was delivered). Below Node's ceiling both "
              "servers deliver everything at once and their p99s sit at the same floor (the generator receiving "
              f"{m['fanout']} copies of each publish on one CPU, and scheduling noise from the machine's other work): "
              "that row is a reference, not a claim."]
    bound = not_a_ceiling(cases, float(m["workers"]))
    if bound:
        lines += ["", "**Not a server ceiling:** in " + "; ".join(bound) + " no server kept "
                  f"{0.9 * float(m['workers']):.1f} cores busy (median over repeats), so something else (the "
                  "generator, or other processes on the same CPUs) set the pace there; server CPU s/M (CPU per "
                  "million deliveries) is the comparison that holds in that case."]
    return lines
