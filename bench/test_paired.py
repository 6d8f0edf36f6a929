"""python3 bench/test_paired.py: checks bench/paired.py (the operator's statistics, through
`kubectl msgbench stats paired`: build it first, `cargo build -p kubectl-msgbench`) against values
worked by hand."""
import math
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paired import Diff, Ratio, cell, med_range  # noqa: E402
from results_md import Row, variant_table  # noqa: E402


# t(0.975, df): the exact Student-t quantiles (statrs), which the old hand-written table rounded.
T2, T11 = 4.302652729749464, 2.200985160082949


class RatioTest(unittest.TestCase):
    def test_geometric_mean_and_interval_on_logs(self):
        # Ratios 0.5, 2, 1: logs -ln2, ln2, 0 -> mean 0, sd ln2, half = t(2) * ln2 / sqrt(3).
        r = Ratio([1, 4, 3], [2, 2, 3])
        self.assertAlmostEqual(r.est, 1.0)
        half = T2 * math.log(2) / math.sqrt(3)
        self.assertAlmostEqual(r.lo, math.exp(-half))
        self.assertAlmostEqual(r.hi, math.exp(half))
        self.assertEqual((r.min, r.max), (0.5, 2.0))

    def test_verdicts_need_the_whole_interval(self):
        tight_low = Ratio([0.20, 0.21, 0.22, 0.20, 0.21], [1] * 5)
        self.assertEqual(tight_low.at_most(0.33), "met")
        tight_high = Ratio([0.50, 0.52, 0.49, 0.51, 0.50], [1] * 5)
        self.assertEqual(tight_high.at_most(0.33), "not met")
        wide = Ratio([0.1, 0.6, 0.2, 0.5, 0.3], [1] * 5)
        self.assertEqual(wide.at_most(0.33), "undecided")
        self.assertEqual(Ratio([0.1], [1]).at_most(0.33), "undecided", "one repeat proves nothing")
        self.assertEqual(tight_high.at_least(0.45), "met")
        self.assertEqual(tight_low.at_least(0.45), "not met")

    def test_missing_or_zero_values_are_not_paired(self):
        r = Ratio([2, None, 0, 4], [1, 1, 1, 2])
        self.assertEqual(r.n, 2)
        self.assertAlmostEqual(r.est, 2.0)
        self.assertEqual(Ratio([None], [1]).cell(), "–")

    def test_cell_formats(self):
        r = Ratio([0.20, 0.22], [1, 1])
        self.assertEqual(r.cell(), r.cell(significant=True), "0.1 and above: same as before")
        tiny = Ratio([0.0021, 0.0023], [1, 1])
        self.assertTrue(tiny.cell().startswith("0.00× ["))
        self.assertTrue(tiny.cell(significant=True).startswith("0.0022× ["))
        # Each number on its own: a wide interval's tiny low end does not stretch the others.
        # df 1: half = t(1) ln 2 = 12.7062 ln 2 (the old table's 12.706 gave 6681.70).
        self.assertEqual(Ratio([0.5, 2.0], [1, 1]).cell(significant=True), "1.00× [0.00015–6682.65] (0.50–2.00)")
        self.assertEqual(cell(Ratio([0.002, 0.002], [1, 1])), "0.0020× [0.0020–0.0020] (0.0020–0.0020)")
        self.assertEqual(cell(Ratio([12.4, 12.6], [1, 1])), Ratio([12.4, 12.6], [1, 1]).cell())

    def test_median_with_its_range(self):
        runs = [{"x": 3}, {"x": None}, {"x": 1}, {"x": 2}]
        self.assertEqual(med_range(runs, "x"), "2 (1–3)")
        self.assertEqual(med_range(runs[1:2], "x"), "–")

    def test_one_call_for_many(self):
        rs = Ratio.many([([1, 4, 3], [2, 2, 3]), ([None], [1]), ([2], [1])])
        self.assertEqual([r.n for r in rs], [3, 0, 1])
        self.assertAlmostEqual(rs[0].hi, Ratio([1, 4, 3], [2, 2, 3]).hi, places=12)
        self.assertEqual((rs[2].est, rs[2].lo), (2.0, None), "one repeat: no interval")
        self.assertEqual(Ratio.many([]), [])


class DiffTest(unittest.TestCase):
    def test_mean_difference_and_interval(self):
        # Differences 1, 2, 3: mean 2, sd 1, half = t(2) / sqrt(3).
        d = Diff([2, 4, 6], [1, 2, 3])
        self.assertAlmostEqual(d.est, 2.0)
        self.assertAlmostEqual(d.hi - d.est, T2 / math.sqrt(3))
        self.assertEqual((d.min, d.max), (1, 3))
        self.assertEqual(d.cell(), "+2.00 [-0.48–+4.48] (+1.00–+3.00)")

    def test_the_quantile_is_exact_between_old_table_rows(self):
        # 12 repeats, df 11: t = 2.2010 (the old table used its df 10 row, 2.228). Differences
        # alternate 1, 3: mean 2, sd sqrt(12/11).
        d = Diff([1, 3] * 6, [0] * 12)
        self.assertAlmostEqual(d.hi - d.est, T11 * math.sqrt(12 / 11) / math.sqrt(12))

    def test_small_differences_keep_two_significant_digits(self):
        d = Diff([0.062, 0.064, None], [0.050, 0.050, 0.050])
        self.assertEqual(d.n, 2, "a repeat without a value is not paired")
        self.assertTrue(d.cell().startswith("+0.013 ["), d.cell())
        self.assertEqual(Diff([None], [1]).cell(), "–")


def _runs(wire_cpu, peer_cpu):
    return {"wire": [{"cpu_per_m": c, "deliv": 100.0} for c in wire_cpu],
            "library": [{"cpu_per_m": 1.0, "deliv": 100.0} for _ in wire_cpu],
            "peer": [{"cpu_per_m": c, "deliv": 50.0} for c in peer_cpu]}


class VariantTableTest(unittest.TestCase):
    def test_a_variant_is_divided_by_its_plain_row_repeat_by_repeat(self):
        plain = Row("plain", 10, "peer", True, _runs([1.0, 2.0], [4.0, 4.0]))
        tls = Row("over TLS", 10, "peer", True, _runs([1.5, 3.0], [6.0, 6.0]), base="plain")
        table = variant_table([plain, tls])
        self.assertEqual(len(table), 3, "one row: the plain case has no base")
        cells = [c.strip() for c in table[2].split("|")[1:-1]]
        self.assertEqual(cells[:2], ["over TLS", "plain"])
        self.assertTrue(cells[2].startswith("1.50× [1.50–1.50]"), cells[2])  # wire CPU ratio per repeat
        self.assertTrue(cells[3].startswith("+0.75 ["), cells[3])  # wire: +0.5 and +1.0 µs
        self.assertTrue(cells[4].startswith("1.00×"), cells[4])  # wire throughput
        self.assertTrue(cells[6].startswith("1.50×"), cells[6])  # peer CPU ratio
        self.assertTrue(cells[7].startswith("+2.00 [+2.00–+2.00]"), cells[7])

    def test_no_table_without_a_variant_or_its_plain_row(self):
        self.assertEqual(variant_table([Row("plain", 10, "peer", True, _runs([1.0], [1.0]))]), [])
        orphan = Row("over TLS", 10, "peer", True, _runs([1.0], [1.0]), base="plain")
        self.assertEqual(variant_table([orphan]), [])


if __name__ == "__main__":
    unittest.main()
