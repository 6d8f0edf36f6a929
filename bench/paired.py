"""Paired ratios and differences for the bench tables, computed by the operator's own code
(operator-core/src/run/paired.rs, through `kubectl msgbench stats paired`); this module formats.

Every repeat runs every tool back to back, so a repeat's drift (the machine's other work)
hits them alike and cancels in that repeat's ratio. The estimate is the geometric mean of
the per-repeat ratios with a 95 % Student-t interval on their logarithms. Also the tables' shared
cell formats (fmt, ms, cell, med_range).
"""
import functools
import json
import math
import os
import shutil
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = "cargo build -p kubectl-msgbench"


@functools.cache
def stats_bin():
    """MSGBENCH_STATS_BIN, else the newest kubectl-msgbench build in $CARGO_TARGET_DIR, else in
    target/, else kubectl-msgbench on PATH."""
    if os.environ.get("MSGBENCH_STATS_BIN"):
        return os.environ["MSGBENCH_STATS_BIN"]
    dirs = [Path(os.environ["CARGO_TARGET_DIR"])] if os.environ.get("CARGO_TARGET_DIR") else []
    for target in dirs + [ROOT / "target"]:
        builds = [b for b in (target / "debug/kubectl-msgbench", target / "release/kubectl-msgbench") if b.is_file()]
        if builds:
            return str(max(builds, key=lambda b: b.stat().st_mtime))
    on_path = shutil.which("kubectl-msgbench")
    if on_path:
        return on_path
    raise RuntimeError(f"bench/paired.py: no kubectl-msgbench binary for the statistics: build it with `{BUILD}` "
                       "(or set MSGBENCH_STATS_BIN)")


def build_stats_bin():
    """For the bench scripts, before they measure: a debug build, as stats_bin() finds it."""
    subprocess.run(BUILD.split() + ["-q"], cwd=ROOT, check=True)


def paired_batch(kind, pairs):
    """One `kubectl msgbench stats paired` call for many comparisons: kind 'ratio' or 'difference',
    pairs [(ours, theirs)] lists aligned by repeat (None where a repeat lacks the value). Returns a
    dict per pair: n, estimate, low, high, min, max (None where undefined)."""
    if not pairs:
        return []
    body = json.dumps([{"ours": list(o), "theirs": list(t)} for o, t in pairs])
    r = subprocess.run([stats_bin(), "stats", "paired", "--kind", kind], input=body, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{stats_bin()} stats paired failed ({r.returncode}): {r.stderr.strip()} "
                           f"(an old build? `{BUILD}`)")
    return [json.loads(line) for line in r.stdout.splitlines()]


def median(xs):
    """Median of the values present (None where a repeat lacks one); None without any. The tables'
    absolute figures: context beside the paired ratios."""
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# What the ratio columns show and how a goal is judged, as every bench RESULTS.md says it.
RATIOS = ("Each repeat gives one ratio per figure; the ratio tables show the geometric mean over the repeats, its 95 % "
          "Student-t interval on the log ratios [low–high] and the min–max (the operator's statistics, "
          "operator-core/src/run/paired.rs, through bench/paired.py).")
VERDICT = ("A goal is **met** where the whole interval clears it, **not met** where the whole interval misses it, "
           "else **undecided** (always with one repeat).")


def fmt(x, d=0):
    return "–" if x is None else f"{x:,.{d}f}"


def ms(us):
    return "–" if us is None else f"{us / 1000:.2f}"


def med_range(runs, key, f=fmt):
    """'median (min–max)' of `key` over runs, each value through `f`."""
    vals = [r[key] for r in runs if r[key] is not None]
    return "–" if not vals else f"{f(statistics.median(vals))} ({f(min(vals))}–{f(max(vals))})"


def table(cols, rows):
    """Markdown: the header of `cols`, then one line per row of cells."""
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + ["| " + " | ".join(map(str, r)) + " |"
                                                                     for r in rows]


def cell(r):
    """'est× [lo–hi] (min–max)' (Ratio.cell), small ratios with two significant digits."""
    return r.cell(significant=True)


class _Paired:
    """n, est, lo, hi, min, max of one comparison (None where undefined)."""
    KIND = None

    def __init__(self, ours, theirs, s=None):
        s = s or paired_batch(self.KIND, [(ours, theirs)])[0]
        self.n, self.est, self.lo, self.hi = s["n"], s["estimate"], s["low"], s["high"]
        self.min, self.max = s["min"], s["max"]

    @classmethod
    def many(cls, pairs):
        """One per (ours, theirs), from a single process call."""
        return [cls(None, None, s) for s in paired_batch(cls.KIND, pairs)]


def ratios(per, ours, theirs, keys=("cpu_per_m", "delivered", "p99")):
    """{figure: Ratio ours ÷ theirs} over {name: [run per repeat]} (by default server CPU per million
    deliveries, delivered msg/s and p99), from one process call."""
    return dict(zip(keys, Ratio.many([([r[k] for r in per[ours]], [r[k] for r in per[theirs]]) for k in keys])))


def _decimals(x, digits):
    """At least `digits` decimals, more for two significant digits of a small x (at most 8)."""
    return digits if x <= 0 else min(8, max(digits, 1 - math.floor(math.log10(x))))


class Ratio(_Paired):
    """ours ÷ theirs over paired repeats: geometric mean, 95 % interval, min and max. A repeat
    where either value is None or ≤ 0 is skipped (no ratio exists)."""
    KIND = "ratio"

    def at_most(self, goal):
        """'met' when the whole interval is ≤ goal, 'not met' when it is all above, else
        'undecided' (too few repeats count as undecided too)."""
        return self._verdict(self.lo is not None and self.hi <= goal, self.lo is not None and self.lo > goal)

    def at_least(self, goal):
        """Mirror of at_most: 'met' when the whole interval is ≥ goal."""
        return self._verdict(self.lo is not None and self.lo >= goal, self.lo is not None and self.hi < goal)

    @staticmethod
    def _verdict(met, missed):
        return "met" if met else "not met" if missed else "undecided"

    def cell(self, digits=2, significant=False):
        """'0.21× [0.18–0.25] (0.17–0.26)': estimate, 95 % interval, min–max. With significant,
        a number below 0.1 gets the decimals for two significant digits ('0.0021', not '0.00')."""
        if self.est is None:
            return "–"
        f = lambda x: f"{x:.{_decimals(x, digits) if significant else digits}f}"
        ci = f" [{f(self.lo)}–{f(self.hi)}]" if self.lo is not None else ""
        return f"{f(self.est)}×{ci} ({f(self.min)}–{f(self.max)})"


class Diff(_Paired):
    """ours − theirs over paired repeats (e.g. the extra µs of CPU a message costs over TLS):
    arithmetic mean of the per-repeat differences, its 95 % Student-t interval, min and max. A
    repeat where either value is None is skipped."""
    KIND = "difference"

    def cell(self, digits=2):
        """'+0.62 [+0.55–+0.70] (+0.51–+0.80)': at least `digits` decimals, more for two
        significant digits of the largest number's magnitude below 0.1."""
        if self.est is None:
            return "–"
        nums = [x for x in (self.est, self.lo, self.hi, self.min, self.max) if x is not None]
        d = _decimals(max(abs(x) for x in nums), digits)
        f = lambda x: f"{x:+.{d}f}"
        ci = f" [{f(self.lo)}–{f(self.hi)}]" if self.lo is not None else ""
        return f"{f(self.est)}{ci} ({f(self.min)}–{f(self.max)})"
