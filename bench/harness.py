"""What the bench scripts (bench/run, bench/pubsub/run, bench/websocket/run, bench/operator/run)
share: the environment, ports, servers pinned to a CPU, one bench-runner run against a server
with the server's /proc counters around it, the raw files, the machine line. 127.0.0.1 only;
every run is bounded by a timeout.
"""
import json, os, platform, signal, socket, subprocess, sys, threading, time, urllib.request
from pathlib import Path

import paired

ROOT = Path(__file__).resolve().parent.parent
# As e2e/contract.env has it (an empty MSGBENCH_CACHE is unset).
CACHE = Path(os.environ.get("MSGBENCH_CACHE") or Path.home() / ".cache/msgbench")
os.environ["PATH"] = f"{CACHE}/bin:/usr/local/go/bin:{os.environ['PATH']}"
PART = os.path.relpath(os.path.abspath(sys.argv[0]), ROOT) if sys.argv[0] else "bench"
TICK = os.sysconf("SC_CLK_TCK")


env_int = lambda name, default: int(os.environ.get(name) or default)
env_ints = lambda name, default: [int(x) for x in (os.environ.get(name) or default).split(",")]  # e.g. rates
REPEATS = env_int("BENCH_REPEATS", 5)


def cpus(part):
    """(server CPU, generator CPU): servers on the last CPU, the generator on CPU 0, unless
    BENCH_<part>_SERVER_CPU / BENCH_<part>_GEN_CPU say otherwise; no pinning on one CPU."""
    n = os.cpu_count() or 1
    return (None, None) if n == 1 else (env_int(f"BENCH_{part}_SERVER_CPU", n - 1), env_int(f"BENCH_{part}_GEN_CPU", 0))


def placement(server_cpu, gen_cpu):
    return (f"each server pinned to CPU {server_cpu}, the generator to CPU {gen_cpu}, all at nice -10 in their "
            "own autogroups" if server_cpu is not None else "no CPU pinning (one CPU)")


def log(*a):
    print(f"{PART}:", *a, file=sys.stderr, flush=True)


def die(msg):
    sys.exit(f"{PART}: {msg}")


def output(*cmd):
    """A command's output (its stdout, else its stderr), stripped; '?' when it cannot run."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (r.stdout or r.stderr).strip()
    except OSError:
        return "?"


def machine():
    """'<CPU model>, <n> CPUs, <kernel>': the machine line every bench RESULTS.md states."""
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def release_bins(*crates):
    """The release builds of `crates` in $CARGO_TARGET_DIR; built first (with the statistics'
    kubectl-msgbench, bench/paired.py) unless BENCH_NO_BUILD=1."""
    if os.environ.get("BENCH_NO_BUILD") != "1":
        if crates:
            log(f"building release binaries ({', '.join(crates)})")
            subprocess.run(["cargo", "build", "--release", "-q", *(a for c in crates for a in ("-p", c))],
                           cwd=ROOT, check=True)
        paired.build_stats_bin()
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    return [target / "release" / c for c in crates]


def write_results(path, lines):
    """RESULTS.md: written, and printed (bench/run appends what a part prints)."""
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    print(text)


def raw_files(part, tag, workload):
    """bench/results/raw/<part>/<tag>.workload (written) and <tag>.json, bench-runner's output."""
    d = ROOT / "bench/results/raw" / part
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{tag}.workload").write_text(workload)
    return d / f"{tag}.workload", d / f"{tag}.json"


def runner_cmd(br, workload_file, target, out, runner_id, *extra):
    return [str(br), "run", "-f", str(workload_file), "--target", target, "--output", str(out),
            "--runner-id", str(runner_id), *map(str, extra)]


def free_ports(k=1):
    """k distinct free ports (every socket stays bound until all are chosen)."""
    socks = [socket.create_server(("127.0.0.1", 0)) for _ in range(k)]
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


free_port = lambda: free_ports()[0]


def wait_ready(port, proc, limit=30, health=False):
    """Until 127.0.0.1:port accepts a connection (health: until GET /health answers 200, e.g.
    after the Node harness's `npm ci`); exits when proc dies or the limit passes."""
    t = time.time()
    while time.time() - t < limit:
        if proc.poll() is not None:
            die(f"server on {port} exited with {proc.returncode}")
        try:
            if health:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                    if r.status == 200:
                        return
            else:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return
        except OSError:
            time.sleep(0.05)
    die(f"nothing {'healthy' if health else 'listening'} on 127.0.0.1:{port} within {limit} s")


def placed(cpu):
    """preexec_fn (after setsid): pin to `cpu` and raise priority where permitted. With
    autogroup scheduling (sched_autogroup_enabled=1) each session shares the CPU equally with
    every other session whatever the nice values inside it, so the new session's autogroup gets
    nice -10 too; without that a concurrent build took ~40% of the server's CPU. The process
    nice is set absolutely, so a script started under `nice -n 19` still gives -10 here."""
    def f():
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        for raise_priority in (lambda: Path("/proc/self/autogroup").write_text("-10"),
                               lambda: os.setpriority(os.PRIO_PROCESS, 0, -10)):
            try:
                raise_priority()
            except OSError:
                pass
    return f


def proc_cpu(pid):
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def proc_hwm(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


def metric_drops(port, name):
    """Deliveries pubsub-server dropped for slow clients so far: the sum of its counter `name`
    (slow-subscriber drops, /ws ring skips); None for a server without pubsub-server's /metrics."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return None
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
               if l.split("{")[0].split(" ")[0] == name) if "pubsub_" in text else None


def log_drops(path, marker):
    """Deliveries a server dropped (sockudo): the lines of its log that contain `marker`."""
    try:
        return sum(1 for line in open(path, errors="replace") if marker in line)
    except OSError:
        return None


class Server:
    """A server process pinned to `cpu` in its own session, ready once its port listens (or its
    /health answers). `drops()` counts what it dropped for slow clients, `scheme` is the URL
    scheme bench-runner targets it with, `runner_env` what bench-runner needs to reach it."""

    def __init__(self, name, cmd, env, port, cpu, short=None, protocol=None, scheme="ws", cwd=None,
                 runner_env=None, log=None, drops=lambda port: None, health=False, limit=30):
        self.name, self.short, self.port, self.protocol, self.scheme = name, short, port, protocol, scheme
        self.runner_env, self._drops = runner_env or {}, drops
        err = open(log, "wb") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, env={**os.environ, **env}, cwd=cwd, stdout=subprocess.DEVNULL,
                                     stderr=err, start_new_session=True, preexec_fn=placed(cpu))
        if log:
            err.close()
        try:
            wait_ready(port, self.proc, limit, health)
        except BaseException:
            self.stop()
            raise

    drops = lambda self: self._drops(self.port)
    __enter__ = lambda self: self
    __exit__ = lambda self, *exc: self.stop()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill(); self.proc.wait()


class PeakCpu:
    """Samples a process's CPU every 0.25 s while a run goes on; `peak` = the most cores it kept
    busy over any 1 s window (steady state in closed loop, unlike an average over connect,
    warm-up and drain)."""

    def __init__(self, pid):
        self.pid, self.samples, self.stop = pid, [], threading.Event()
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while not self.stop.is_set():
            try:
                self.samples.append((time.monotonic(), proc_cpu(self.pid)))
            except OSError:
                return
            self.stop.wait(0.25)

    def peak(self):
        self.stop.set(); self.t.join()
        best = None
        for i, (t0, c0) in enumerate(self.samples):
            for t1, c1 in self.samples[i + 1:]:
                if t1 - t0 >= 1.0:
                    best = max(best or 0.0, (c1 - c0) / (t1 - t0))
                    break
        return best


# What run_case's figures mean, as bench/pubsub and bench/websocket's RESULTS.md say it.
FIGURES = ("Delivered = unique deliveries to all subscribers per second, first send to last delivery (bench-runner's "
           "deliveryRate); latency = intended send time → receipt (open loop, one clock, HdrHistogram). Server CPU "
           "s/M = the server process's user+system CPU seconds over the whole bench-runner run per million "
           "deliveries (warm-up included); server cores busy = the most CPU seconds per second the server used over "
           "any 1 s of the run (sampled every 0.25 s); generator cores busy = bench-runner's CPU seconds over its "
           "wall time; peak RSS = the server process's peak resident set since it started (each server runs "
           "through every case and repeat).")


def rotated(xs, i):
    """xs rotated by i: the order of repeat i, so no run always comes first."""
    xs = list(xs)
    return xs[i % len(xs):] + xs[:i % len(xs)]


def paired_repeats(cases, servers, measure):
    """REPEATS paired repeats: repeat k runs every case against every server back to back, the
    servers' order rotating per repeat, so a moment of the machine's other work hits the servers
    of one repeat alike. measure(case, server, k) → a run. Returns {case: {server name: [run
    per repeat]}}."""
    out = {c: {s.name: [] for s in servers} for c in cases}
    for k in range(REPEATS):
        for c in cases:
            for s in rotated(servers, k):
                log(f"repeat {k + 1}/{REPEATS} | {c} | {s.name}")
                out[c][s.name].append(measure(c, s, k))
    return out


def run_case(br, server, workload, part, tag, timeout, gen_cpu):
    """One bench-runner run of `workload` (JSON text) against `server`, the runner pinned to
    gen_cpu; exits on failure. Returns the run's figures with the server's CPU (and per million
    deliveries, warm-up included), busiest second, peak RSS and drops, and the generator's."""
    wf, out = raw_files(part, tag, workload)
    cpu0, drops0 = proc_cpu(server.proc.pid), server.drops()
    sampler = PeakCpu(server.proc.pid)
    p = subprocess.Popen(runner_cmd(br, wf, f"{server.scheme}://127.0.0.1:{server.port}", out, 7),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, **server.runner_env}, start_new_session=True, preexec_fn=placed(gen_cpu))
    gen_sampler = PeakCpu(p.pid)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill(); p.wait()
        die(f"bench-runner against {server.name} ran past {timeout} s")
    gen_peak = gen_sampler.peak()
    if p.returncode != 0:
        die(f"bench-runner failed against {server.name}: {err[-1500:]}")
    cpu = proc_cpu(server.proc.pid) - cpu0
    peak = sampler.peak()
    drops1 = server.drops()
    r = json.loads(out.read_text())
    m, s, g = r["measured"], r["measured"]["summary"], r["generator"]
    lat = s.get("latency") or {}
    all_received = m["received"] + (r.get("warmup") or {}).get("received", 0)
    return {
        "delivered": s.get("deliveryRate") or s["receiveRate"], "ratio": s["deliveredRatio"], "pub": s["publishRate"],
        "p50": lat.get("p50Us"), "p99": lat.get("p99Us"), "p999": lat.get("p999Us"),
        "errors": s["errors"], "error_kinds": m.get("errors") or {},
        "saturated": g["saturated"], "reasons": g.get("reasons", []),
        "gen_busy": g["cpuSeconds"] / g["wallSeconds"] if g["wallSeconds"] else None, "gen_peak": gen_peak,
        "cpu": cpu, "cpu_per_m": cpu / all_received * 1e6 if all_received else None,
        "rss": proc_hwm(server.proc.pid), "peak": peak,
        "drops": None if drops0 is None or drops1 is None else drops1 - drops0,
    }
