"""Paired ratios for bench/run, the way operator-core/src/run/paired.rs compares variants.

Every repeat runs every tool back to back, so a repeat's drift (the machine's other work)
hits them alike and cancels in that repeat's ratio. The estimate is the geometric mean of
the per-repeat ratios with a 95 % Student-t interval on their logarithms.
"""
import math
import statistics

# Two-sided 95 % Student-t quantiles by degrees of freedom (no scipy on every machine).
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def t975(df):
    """The quantile for df, rounded down to a tabulated df (a wider, safe interval)."""
    if df < 1:
        return math.inf
    return T975[max(k for k in T975 if k <= df)] if df <= 30 else 1.96


def _decimals(x, digits):
    """At least `digits` decimals, more for two significant digits of a small x (at most 8)."""
    return digits if x <= 0 else min(8, max(digits, 1 - math.floor(math.log10(x))))


class Ratio:
    """ours ÷ theirs over paired repeats: geometric mean, 95 % interval, min and max."""

    def __init__(self, ours, theirs):
        pairs = [(a, b) for a, b in zip(ours, theirs) if a and b and a > 0 and b > 0]
        self.n = len(pairs)
        ratios = [a / b for a, b in pairs]
        logs = [math.log(r) for r in ratios]
        self.est = math.exp(statistics.fmean(logs)) if logs else None
        self.min = min(ratios) if ratios else None
        self.max = max(ratios) if ratios else None
        self.lo = self.hi = None
        if len(logs) >= 2:
            half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
            m = statistics.fmean(logs)
            self.lo, self.hi = math.exp(m - half), math.exp(m + half)

    def at_most(self, goal):
        """'met' when the whole interval is ≤ goal, 'not met' when it is all above, else
        'undecided' (too few repeats count as undecided too)."""
        if self.lo is None:
            return "undecided"
        if self.hi <= goal:
            return "met"
        if self.lo > goal:
            return "not met"
        return "undecided"

    def at_least(self, goal):
        """Mirror of at_most: 'met' when the whole interval is ≥ goal."""
        if self.lo is None:
            return "undecided"
        if self.lo >= goal:
            return "met"
        if self.hi < goal:
            return "not met"
        return "undecided"

    def cell(self, digits=2, significant=False):
        """'0.21× [0.18–0.25] (0.17–0.26)': estimate, 95 % interval, min–max. With significant,
        a number below 0.1 gets the decimals for two significant digits ('0.0021', not '0.00')."""
        if self.est is None:
            return "–"
        f = lambda x: f"{x:.{_decimals(x, digits) if significant else digits}f}"
        ci = f" [{f(self.lo)}–{f(self.hi)}]" if self.lo is not None else ""
        return f"{f(self.est)}×{ci} ({f(self.min)}–{f(self.max)})"


class Diff:
    """ours − theirs over paired repeats (e.g. the extra µs of CPU a message costs over TLS):
    arithmetic mean of the per-repeat differences, its 95 % Student-t interval, min and max."""

    def __init__(self, ours, theirs):
        ds = [a - b for a, b in zip(ours, theirs) if a is not None and b is not None]
        self.n = len(ds)
        self.est = statistics.fmean(ds) if ds else None
        self.min = min(ds) if ds else None
        self.max = max(ds) if ds else None
        self.lo = self.hi = None
        if len(ds) >= 2:
            half = t975(len(ds) - 1) * statistics.stdev(ds) / math.sqrt(len(ds))
            self.lo, self.hi = self.est - half, self.est + half

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
