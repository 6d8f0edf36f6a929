"""python3 bench/test_psreport.py: checks bench/pubsub/psreport.py (the pubsub RESULTS.md tables)."""
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "pubsub")]
import psreport as ps  # noqa: E402
from paired import Ratio  # noqa: E402

NODE, PAR, SEQ = "Node", "pubsub-server parallel", "pubsub-server sequential"
LAG = "runner 7: send lag p99 460543 µs > 10000 µs"
UNSENT = "runner 7: sent 11714 of 32000 scheduled messages"


def run(delivered, p99, cpu, saturated=(), ratio=1.0, drops=0, peak=0.95):
    return {"delivered": delivered, "p99": p99, "cpu_per_m": cpu, "saturated": bool(saturated),
            "reasons": list(saturated), "ratio": ratio, "pub": delivered / 64, "p50": p99 / 2, "peak": peak,
            "gen_busy": 0.5, "rss": 25 * 2**20, "drops": drops}


def case(closed, node, par, seq, name="c"):
    return (name, closed, {NODE: node, PAR: par, SEQ: seq})


class CellTest(unittest.TestCase):
    def test_small_ratios_keep_two_significant_digits(self):
        self.assertEqual(ps.cell(Ratio([0.002, 0.002], [1, 1])), "0.0020× [0.0020–0.0020] (0.0020–0.0020)")
        self.assertEqual(ps.cell(Ratio([12.4, 12.6], [1, 1])), Ratio([12.4, 12.6], [1, 1]).cell())


class SaturationTest(unittest.TestCase):
    def test_reason_kinds(self):
        self.assertEqual(ps.reason_kind(LAG), "send lag")
        self.assertEqual(ps.reason_kind(UNSENT), "unsent")
        self.assertEqual(ps.reason_kind("runner 7: CPU 97% of 1 CPUs"), "generator CPU")
        self.assertEqual(ps.reason_kind("runner 7: something new"), "something new")

    def test_which_repeats_and_why(self):
        runs = [run(1, 1, 1), run(1, 1, 1, [LAG, UNSENT]), run(1, 1, 1), run(1, 1, 1, [LAG])]
        self.assertEqual(ps.saturation(runs), ([2, 4], ["send lag", "unsent"]))
        self.assertEqual(ps.saturation_text(runs), "saturated in 2, 4 of 4: send lag, unsent")
        self.assertEqual(ps.saturation_text(runs[:1]), "ok (0 of 1)")

    def test_mark_names_the_saturated_server(self):
        per = {NODE: [run(1, 1, 1, [LAG]), run(1, 1, 1)], PAR: [run(1, 1, 1)] * 2}
        self.assertEqual(ps.saturation_mark(per, (NODE, PAR)), f"**⚠** {NODE} in 1 (send lag)")
        self.assertEqual(ps.saturation_mark({PAR: per[PAR]}, (PAR,)), "none")


class TableTest(unittest.TestCase):
    def test_vs_node_rows_pair_repeats_and_judge_the_goal(self):
        node = [run(90_000, 700_000, 10.0), run(80_000, 900_000, 11.0), run(95_000, 600_000, 10.5)]
        par = [run(1_100_000, 50_000, 0.8), run(1_000_000, 60_000, 0.9), run(1_150_000, 45_000, 0.8)]
        rows = ps.vs_node_table([case(True, node, par, par)], NODE, (PAR, SEQ))
        self.assertEqual(len(rows), 4)
        self.assertIn(f"| c | {PAR} ÷ Node | 0.079× [", rows[2])
        self.assertIn("delivered ≥ 3×: **met**", rows[2])
        self.assertTrue(rows[2].endswith("| none |"))

    def test_open_loop_goal_and_saturation_mark(self):
        kept_up = [run(32_000, 14_000, 13.0)] * 3
        fast = [run(32_000, 5_000, 10.0)] * 3
        rows = ps.vs_node_table([case(False, kept_up, fast, fast)], NODE, (PAR,))
        self.assertIn("reference (Node kept up; not claimed)", rows[2])
        behind = [run(85_000, 978_000, 10.8, [LAG]), run(86_000, 900_000, 10.0), run(84_000, 950_000, 11.0, [LAG])]
        fast = [run(96_000, 5_000, 5.5), run(96_000, 4_000, 5.0), run(96_000, 6_000, 5.2)]
        row = ps.vs_node_table([case(False, behind, fast, fast)], NODE, (PAR,))[2]
        self.assertIn("p99 ≤ 0.33×: **met**", row)
        self.assertIn(f"**⚠** {NODE} in 1, 3 (send lag)", row)

    def test_medians_and_drops(self):
        node = [run(3, 1, 1, drops=None), run(1, 1, 1, drops=None), run(2, 1, 1, drops=None)]
        par = [run(10, 1, 1, drops=2), run(20, 1, 1, drops=0, ratio=0.99), run(30, 1, 1, drops=1)]
        rows = ps.medians_table([case(True, node, par, par)], (NODE, PAR))
        self.assertTrue(rows[2].startswith(f"| c | {NODE} | 2 | 1.0000 |"))
        self.assertIn("n/a (unbounded)", rows[2])
        self.assertTrue(rows[3].startswith(f"| c | {PAR} | 20 | 0.9900 |"))
        self.assertIn("| 3 | ok (0 of 3) |", rows[3])

    def test_not_a_ceiling_needs_a_busy_server(self):
        idle = [run(1, 1, 1, peak=0.5)] * 3
        busy = [run(1, 1, 1, peak=0.97)] * 3
        cases = [case(True, idle, idle, idle, "idle"), case(True, idle, busy, idle, "busy"),
                 case(False, idle, idle, idle, "open")]
        self.assertEqual(ps.not_a_ceiling(cases, 1.0), ["idle"])


if __name__ == "__main__":
    unittest.main()
