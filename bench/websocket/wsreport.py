"""Markdown for bench/websocket/run: per-rate medians with their spread, paired reference ÷ sockudo
ratios with 95 % intervals, and the ceiling searches."""
from wsstats import median, paired, ratio_intervals, spread, verdict


def fmt(x, d=0):
    return "–" if x is None else f"{x:,.{d}f}"


def ms(us):
    return "–" if us is None else f"{us / 1000:.2f}"


def med_range(runs, key, f):
    """'median (min–max)' of `key` over runs, each value through `f`."""
    vals = [r[key] for r in runs]
    m, sp = median(vals), spread(vals)
    return "–" if m is None else f"{f(m)} ({f(sp[0])}–{f(sp[1])})"


def iv_text(iv):
    return "–" if iv is None else f"{iv[0]:.2f}× [{iv[1]:.2f}, {iv[2]:.2f}]"


def rate_table(results, servers, subscribers):
    lines = ["| offered publish/s (deliveries/s) | server | delivered msg/s | delivered ratio (min) | p50 ms | "
             "p99 ms | server CPU s/M | server cores busy | generator cores busy | peak RSS MB | errors, server drops | "
             "generator saturated |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rate, runs in results.items():
        for s in servers:
            rs = runs[s.name]
            errs = sum(r["errors"] for r in rs)
            skips = sum(r["drops"] or 0 for r in rs)
            sat = sum(1 for r in rs if r["saturated"])
            lines.append(
                f"| {rate:,} ({rate * subscribers:,}) | {s.name} | {med_range(rs, 'delivered', fmt)} | "
                f"{min(r['ratio'] for r in rs):.4f} | {med_range(rs, 'p50', ms)} | {med_range(rs, 'p99', ms)} | "
                f"{med_range(rs, 'cpu_per_m', lambda x: fmt(x, 1))} | {med_range(rs, 'peak', lambda x: fmt(x, 2))} | "
                f"{med_range(rs, 'gen_busy', lambda x: fmt(x, 2))} | "
                f"{med_range(rs, 'rss', lambda x: fmt(x / 2**20, 1))} | {errs}, {skips:.0f} | {sat} of {len(rs)} |")
    return lines


def ratio_table(results, ref, sck):
    lines = ["| offered publish/s | server CPU s/M: per-pair ratios | geo. mean [95 % t interval] | ≤ 1.0? | "
             "p99: geo. mean [95 % t interval] | delivered/s: geo. mean |",
             "|---|---|---|---|---|---|"]
    for rate, runs in results.items():
        a, b = runs[ref.name], runs[sck.name]
        cpu = paired(a, b, "cpu_per_m")
        iv, p99, dl = ratio_intervals([cpu, paired(a, b, "p99"), paired(a, b, "delivered")])
        lines.append(f"| {rate:,} | {' '.join(fmt(x, 2) for x in cpu)} | {iv_text(iv)} | {verdict(iv, 1.0)} | "
                     f"{iv_text(p99)} | {'–' if dl is None else f'{dl[0]:.3f}×'} |")
    return lines


def ceiling_lines(st, servers, subscribers, bound_ms):
    lines = ["| server | ceiling: deliveries/s (publishes/s) | p99 ms there | first failing publish/s: why | "
             "generator CPU at the failure | trials (publish/s: pass or why) |",
             "|---|---|---|---|---|---|"]
    for s in servers:
        x = st[s.name]
        best = x["best"]
        cell = "below the first step" if best is None else f"{fmt(best[1]['delivered'])} ({best[0]:,})"
        p99 = "–" if best is None else ms(best[1]["p99"])
        fail = x["fail"]
        fcell = "none up to the top step" if fail is None else f"{fail[0]:,}: {', '.join(fail[2])}"
        gcell = "–" if fail is None else (f"{fmt(fail[1].get('gen_peak'), 2)} cores"
                                          + (" (generator-limited: a lower bound)" if fail[3] else ""))
        trials = "; ".join(f"{r:,}: {'pass' if not why else ', '.join(why)}" for r, _, why in x["trials"])
        lines.append(f"| {s.name} | {cell} | {p99} | {fcell} | {gcell} | {trials} |")
    return lines


def confirm_lines(confirm, servers):
    """Repeats at each server's ceiling rate: median delivered/s with spread, passes."""
    lines = ["| server | at publish/s | delivered msg/s median (min–max) | p99 ms median (min–max) | passed |",
             "|---|---|---|---|---|"]
    for s in servers:
        if s.name not in confirm:
            continue
        rate, runs, passes = confirm[s.name]
        lines.append(f"| {s.name} | {rate:,} | {med_range(runs, 'delivered', fmt)} | {med_range(runs, 'p99', ms)} | "
                     f"{passes} of {len(runs)} |")
    return lines
