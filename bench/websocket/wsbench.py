"""Servers and single bench-runner runs for bench/websocket/run: start a server pinned to its CPU,
run one bench-runner workload against it (pinned to the other CPU), and read back what the run
and the server's /proc counters say. 127.0.0.1 only; every run bounded by a timeout."""
import json, os, signal, socket, subprocess, sys, threading, time, urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RAW = ROOT / "bench/results/raw/websocket"
# As e2e/contract.env has it (an empty MSGBENCH_CACHE is unset).
CACHE = Path(os.environ.get("MSGBENCH_CACHE") or Path.home() / ".cache/msgbench")
SOCKUDO = CACHE / "bin/sockudo"
SOCKUDO_VERSION = "5.2.0"
# The test app sockudo serves (bench-runner/tests/support PUSHER_APP).
APP_ID, APP_KEY, APP_SECRET = "msgbench", "msgbench-key", "msgbench-secret"
# CPU placement: servers on the last CPU, the generator on CPU 0 (no pinning on one CPU).
NCPU = os.cpu_count() or 1
SERVER_CPU = int(os.environ.get("BENCH_WS_SERVER_CPU", str(NCPU - 1))) if NCPU > 1 else None
GEN_CPU = int(os.environ.get("BENCH_WS_GEN_CPU", "0")) if NCPU > 1 else None
TICK = os.sysconf("SC_CLK_TCK")


def placed(cpu):
    """preexec_fn (after setsid): pin to `cpu` and raise priority where permitted. With
    autogroup scheduling each session shares the CPU equally with every other session whatever
    the nice values inside it, so the new session's autogroup gets nice -10 too. The process
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


def log(*a):
    print("bench/websocket:", *a, file=sys.stderr, flush=True)


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def wait_listening(port, proc, limit=30):
    t = time.time()
    while time.time() - t < limit:
        if proc.poll() is not None:
            sys.exit(f"bench/websocket: server on {port} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close(); return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"bench/websocket: nothing listening on 127.0.0.1:{port} within {limit} s")


def proc_cpu(pid):
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def proc_hwm(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


def ws_drops(port):
    """pubsub-server's broadcast-ring skips (a /ws client that fell behind), None elsewhere."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return None
    vals = [float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.split(" ")[0].endswith("ws_dropped_total")]
    return sum(vals) if vals else None


def sockudo_drops(log):
    """Deliveries sockudo dropped: past 1000 queued messages per connection its local adapter
    logs one "Client buffer full" warning per dropped message and keeps the connection."""
    try:
        with open(log, errors="replace") as f:
            return sum(1 for line in f if "Client buffer full" in line)
    except OSError:
        return None


class Server:
    def __init__(self, name, short, cmd, env, port, protocol, cwd=None, runner_env=None, log=None):
        self.name, self.short, self.port, self.protocol = name, short, port, protocol
        self.runner_env, self.log = runner_env or {}, log
        err = open(log, "wb") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, env={**os.environ, **env}, cwd=cwd, stdout=subprocess.DEVNULL,
                                     stderr=err, start_new_session=True, preexec_fn=placed(SERVER_CPU))
        if log:
            err.close()
        wait_listening(port, self.proc)

    def drops(self):
        """Deliveries the server dropped for slow clients so far (ring skips or buffer-full drops)."""
        return sockudo_drops(self.log) if self.log else ws_drops(self.port)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill(); self.proc.wait()


def reference_server(binary):
    port = free_port()
    return Server("pubsub-server (WS broadcast)", "reference", [str(binary)],
                  {"PORT": str(port), "BIND_ADDRESS": "127.0.0.1", "WS_MODE": "broadcast",
                   "WORKER_THREADS": "1", "RUST_LOG": "warn"}, port, "websocket")


def sockudo_server(workdir):
    """As bench-runner/tests/support `sockudo_at`: environment only (no config/config.toml under
    the temporary working directory), one app, nothing external, limits and rate limiting off
    (otherwise 100 connections and 100 API requests a minute)."""
    port = free_port()
    return Server(f"sockudo {SOCKUDO_VERSION} (Pusher)", "sockudo", [str(SOCKUDO)], {
        "HOST": "127.0.0.1", "PORT": str(port),
        "SOCKUDO_DEFAULT_APP_ID": APP_ID, "SOCKUDO_DEFAULT_APP_KEY": APP_KEY,
        "SOCKUDO_DEFAULT_APP_SECRET": APP_SECRET, "SOCKUDO_DEFAULT_APP_MAX_CONNECTIONS": "0",
        "ADAPTER_DRIVER": "local", "CACHE_DRIVER": "memory", "QUEUE_DRIVER": "none",
        "APP_MANAGER_DRIVER": "memory", "RATE_LIMITER_ENABLED": "false", "METRICS_ENABLED": "false",
        "TOKIO_WORKER_THREADS": "1"}, port, "pusher", cwd=workdir,
        runner_env={"MSGBENCH_PUSHER_APP_ID": APP_ID, "MSGBENCH_PUSHER_KEY": APP_KEY,
                    "MSGBENCH_PUSHER_SECRET": APP_SECRET}, log=str(Path(workdir) / "sockudo.log"))


class PeakCpu:
    """Samples a process's CPU every 0.25 s during a run; `peak` = the most cores it kept busy
    over any 1 s window."""

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


def workload(protocol, rate, load):
    """`load`: publishers, subscribers, payload, seconds, warmup, drain."""
    w = {"protocol": protocol, "publishers": load["publishers"], "subscribers": load["subscribers"],
         "topics": 1, "topicPrefix": "bench", "payloadBytes": load["payload"],
         "durationSeconds": load["seconds"], "warmupSeconds": load["warmup"],
         "drainSeconds": load["drain"], "ratePerPublisher": max(1, rate // load["publishers"])}
    if protocol == "websocket":
        w["websocket"] = {"mode": "broadcast"}
    return json.dumps(w)


def run_case(br, server, rate, tag, load):
    """One bench-runner run of `load` at `rate` publishes/s against `server`; exits on failure."""
    RAW.mkdir(parents=True, exist_ok=True)
    wf, out = RAW / f"{tag}.json.workload", RAW / f"{tag}.json"
    wf.write_text(workload(server.protocol, rate, load))
    cpu0, drops0 = proc_cpu(server.proc.pid), server.drops()
    sampler = PeakCpu(server.proc.pid)
    timeout = load["seconds"] + load["warmup"] + load["drain"] + 60
    p = subprocess.Popen([str(br), "run", "-f", str(wf), "--target", f"ws://127.0.0.1:{server.port}",
                          "--output", str(out), "--runner-id", "7"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env={**os.environ, **server.runner_env},
                         start_new_session=True, preexec_fn=placed(GEN_CPU))
    gen_sampler = PeakCpu(p.pid)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill(); p.wait()
        sys.exit(f"bench/websocket: bench-runner against {server.name} ran past {timeout} s")
    gen_peak = gen_sampler.peak()
    if p.returncode != 0:
        sys.exit(f"bench/websocket: bench-runner failed against {server.name}: {err[-1500:]}")
    cpu = proc_cpu(server.proc.pid) - cpu0
    peak = sampler.peak()
    drops1 = server.drops()
    row = summarise(json.loads(out.read_text()), cpu, peak, proc_hwm(server.proc.pid),
                    None if drops0 is None or drops1 is None else drops1 - drops0)
    row["gen_peak"] = gen_peak
    return row


def summarise(r, cpu, peak, rss, drops):
    m, s = r["measured"], r["measured"]["summary"]
    lat = s.get("latency") or {}
    all_received = m["received"] + (r.get("warmup") or {}).get("received", 0)
    g = r["generator"]
    return {
        "delivered": s.get("deliveryRate") or s["receiveRate"], "ratio": s["deliveredRatio"], "pub": s["publishRate"],
        "p50": lat.get("p50Us"), "p99": lat.get("p99Us"), "p999": lat.get("p999Us"),
        "errors": s["errors"], "error_kinds": m.get("errors") or {},
        "saturated": g["saturated"], "reasons": g.get("reasons", []),
        "gen_busy": g["cpuSeconds"] / g["wallSeconds"] if g["wallSeconds"] else None,
        "cpu": cpu, "cpu_per_m": cpu / all_received * 1e6 if all_received else None,
        "rss": rss, "peak": peak, "drops": drops,
    }
