"""Paired ratios for bench/websocket/run: each repeat runs both servers back to back, the ratio is
taken within that pair (so slow and fast moments of a noisy machine cancel), and the repeats'
log ratios give a geometric mean with a 95 % Student-t interval. Standard library only."""
import math
import statistics

# Two-sided 95 % Student-t quantiles t(0.975, df), df = 1..30; beyond that 1.96 is close enough.
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042]


def t975(df):
    return T975[df - 1] if df <= len(T975) else 1.96


def ratio_interval(ratios):
    """(geometric mean, low, high) of positive ratios: a 95 % t interval on their logs; with one
    ratio the interval is that ratio. None when no ratio is usable."""
    logs = [math.log(r) for r in ratios if r is not None and r > 0]
    if not logs:
        return None
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return (math.exp(mean),) * 3
    half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def paired(a_runs, b_runs, key):
    """a ÷ b per repeat for `key` (pairs where either side is missing are skipped)."""
    out = []
    for a, b in zip(a_runs, b_runs):
        x, y = a.get(key), b.get(key)
        out.append(x / y if x is not None and y else None)
    return out


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs):
    xs = [x for x in xs if x is not None]
    return (min(xs), max(xs)) if xs else None


def verdict(iv, goal):
    """Whether an interval clears `ratio ≤ goal`: 'yes' (high end ≤ goal), 'no' (low end > goal),
    otherwise 'undecided'."""
    if iv is None:
        return "–"
    _, lo, hi = iv
    return "yes" if hi <= goal else "no" if lo > goal else "undecided"


def self_test():
    g, lo, hi = ratio_interval([1.0, 1.0, 1.0])
    assert (g, lo, hi) == (1.0, 1.0, 1.0)
    g, lo, hi = ratio_interval([0.5, 2.0])
    assert abs(g - 1.0) < 1e-12 and lo < 0.01 and hi > 100  # df 1: t = 12.7, very wide
    g, lo, hi = ratio_interval([0.8, 0.9, 0.85, 0.82, 0.88])
    assert lo < g < hi < 1.0 and verdict((g, lo, hi), 1.0) == "yes"
    assert verdict((1.1, 1.05, 1.2), 1.0) == "no" and verdict((1.0, 0.9, 1.1), 1.0) == "undecided"
    assert paired([{"x": 2}, {"x": None}], [{"x": 4}, {"x": 1}], "x") == [0.5, None]
    assert median([3, None, 1, 2]) == 2 and spread([3, None, 1]) == (1, 3)
    assert ratio_interval([None, 0]) is None


if __name__ == "__main__":
    self_test()
    print("wsstats: ok")
