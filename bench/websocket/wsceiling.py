"""Ceiling search for bench/websocket/run: the most deliveries per second a server sustains on
its one pinned CPU. A trial passes when every message is delivered (ratio 1, no errors, no ring
skips), p99 ≤ the bound, and the generator kept its schedule (no saturation reason from
bench-runner). Rates rise by STEP until a trial fails, then bisect between the last pass and the
first failure; servers alternate at every step so both see the same machine. A failure where the
generator's own CPU was ≥ GEN_BUSY is marked generator-limited: the ceiling is then a lower bound."""
GEN_BUSY = 0.9


def judge(r, p99_bound_us):
    """Why a trial failed ([] = it passed), and whether the generator ran out of CPU."""
    why = []
    if r["ratio"] < 1.0:
        why.append(f"delivered {r['ratio']:.4f}")
    if r["errors"]:
        why.append(f"{r['errors']} errors")
    if r.get("drops"):
        why.append(f"{r['drops']:.0f} dropped by the server")
    if r["p99"] is None or r["p99"] > p99_bound_us:
        why.append(f"p99 {(r['p99'] or 0) / 1000:.1f} ms")
    if r["saturated"]:
        why.append("generator: " + "; ".join(r["reasons"])[:80])
    gen_limited = bool(why) and (r.get("gen_peak") or 0) >= GEN_BUSY
    return why, gen_limited


def search(servers, trial, start, step, bisect_steps, max_rate, p99_bound_us):
    """`trial(server, rate)` → a run row. Returns {server name: {"best": (rate, row) or None,
    "fail": (rate, row, why, gen_limited) or None, "trials": [(rate, row, why)]}}."""
    st = {s.name: {"best": None, "fail": None, "trials": []} for s in servers}

    def attempt(s, rate):
        r = trial(s, rate)
        why, gen = judge(r, p99_bound_us)
        st[s.name]["trials"].append((rate, r, why))
        if why:
            cur = st[s.name]["fail"]
            if cur is None or rate < cur[0]:
                st[s.name]["fail"] = (rate, r, why, gen)
        else:
            cur = st[s.name]["best"]
            if cur is None or rate > cur[0]:
                st[s.name]["best"] = (rate, r)
        return not why

    rate, climbing = start, list(servers)
    while climbing and rate <= max_rate:
        climbing = [s for s in climbing if attempt(s, rate)]
        rate = int(rate * step)
    for _ in range(bisect_steps):
        for s in servers:
            lo = st[s.name]["best"][0] if st[s.name]["best"] else 0
            hi = st[s.name]["fail"][0] if st[s.name]["fail"] else None
            if hi is not None and hi - lo > max(10, hi // 50):
                attempt(s, (lo + hi) // 2)
    return st
