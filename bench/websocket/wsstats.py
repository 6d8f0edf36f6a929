"""Paired ratios for bench/websocket/run: each repeat runs both servers back to back, the ratio is
taken within that pair (so slow and fast moments of a noisy machine cancel), and the repeats'
log ratios give a geometric mean with a 95 % Student-t interval, computed by the operator's own
code through bench/paired.py."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# median: re-exported for wsreport and run.
from paired import median, paired_batch  # noqa: E402,F401


def ratio_intervals(ratio_lists):
    """(geometric mean, low, high) of each list's positive ratios (one process call for all): a
    95 % t interval on their logs; with one ratio the interval is that ratio. None when no ratio
    is usable."""
    out = []
    for s in paired_batch("ratio", [(rs, [1] * len(rs)) for rs in ratio_lists]):
        est = s["estimate"]
        out.append(None if est is None else (est, s["low"], s["high"]) if s["low"] is not None else (est,) * 3)
    return out


def ratio_interval(ratios):
    return ratio_intervals([ratios])[0]


def paired(a_runs, b_runs, key):
    """a ÷ b per repeat for `key` (pairs where either side is missing are skipped)."""
    out = []
    for a, b in zip(a_runs, b_runs):
        x, y = a.get(key), b.get(key)
        out.append(x / y if x is not None and y else None)
    return out


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
