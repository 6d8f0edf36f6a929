"""python3 bench/test_reports.py: checks the RESULTS.md tables of bench/pubsub/run (psreport.py) and
bench/websocket/run, and the latter's ceiling search (wsceiling.py). The ratios are the operator's
statistics: build them first, `cargo build -p kubectl-msgbench`."""
import importlib.util
import sys
import unittest
from importlib.machinery import SourceFileLoader
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "pubsub"), str(HERE / "websocket")]
import psreport as ps  # noqa: E402
import wsceiling  # noqa: E402

_loader = SourceFileLoader("ws_run", str(HERE / "websocket/run"))
ws = importlib.util.module_from_spec(importlib.util.spec_from_loader("ws_run", _loader))
_loader.exec_module(ws)

NODE, PAR, SEQ = "Node", "pubsub-server parallel", "pubsub-server sequential"
LAG = "runner 7: send lag p99 460543 µs > 10000 µs"
UNSENT = "runner 7: sent 11714 of 32000 scheduled messages"


def run(delivered, p99, cpu, saturated=(), ratio=1.0, drops=0, peak=0.95):
    return {"delivered": delivered, "p99": p99, "cpu_per_m": cpu, "saturated": bool(saturated),
            "reasons": list(saturated), "ratio": ratio, "pub": delivered / 64, "p50": p99 / 2, "peak": peak,
            "gen_busy": 0.5, "rss": 25 * 2**20, "drops": drops}


def case(closed, node, par, seq, name="c"):
    return (name, closed, {NODE: node, PAR: par, SEQ: seq})


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


class Srv:
    def __init__(self, name, cap=None):
        self.name, self.cap = name, cap


class CeilingTest(unittest.TestCase):
    def test_search_and_judge(self):
        def fake(s, rate):
            ok = rate <= s.cap
            return {"ratio": 1.0, "errors": 0, "drops": 0, "p99": 1000 if ok else 90_000,
                    "saturated": False, "reasons": [], "gen_peak": 0.5}

        st = wsceiling.search([Srv("a", 1000), Srv("b", 3000)], fake, 500, 1.5, 6, 10_000, 50_000)
        self.assertTrue(950 <= st["a"]["best"][0] <= 1000 and st["a"]["fail"][0] > 1000, st["a"])
        self.assertTrue(2900 <= st["b"]["best"][0] <= 3000, st["b"]["best"])
        why, gen = wsceiling.judge({"ratio": 0.9, "errors": 0, "drops": 0, "p99": 1, "saturated": False,
                                    "reasons": [], "gen_peak": 0.97}, 50_000)
        self.assertEqual(why, ["delivered 0.9000"])
        self.assertTrue(gen)


def ws_run(delivered, p99, cpu, drops=0, saturated=False):
    return {"delivered": delivered, "p99": p99, "p50": p99 / 2, "cpu_per_m": cpu, "ratio": 1.0, "peak": 0.9,
            "gen_busy": 0.4, "rss": 2**20, "errors": 0, "drops": drops, "saturated": saturated, "reasons": []}


class WebSocketTablesTest(unittest.TestCase):
    REF, SCK = Srv("ref"), Srv("sck")

    def test_ratio_table_pairs_repeats_and_judges_cpu_per_delivery(self):
        results = {100: {"ref": [ws_run(6400, 1000, 2.0), ws_run(6400, 2000, None)],
                         "sck": [ws_run(6400, 2000, 4.0), ws_run(6400, 2000, 4.0)]},
                   400: {"ref": [ws_run(1, 1, 1.0)] * 3, "sck": [ws_run(1, 1, 2.0), ws_run(1, 1, 2.2), ws_run(1, 1, 1.8)]}}
        rows = ws.ratio_table(results, self.REF, self.SCK)
        self.assertEqual(len(rows), 4)
        self.assertTrue(rows[2].startswith("| 100 | 0.50 – | 0.50× (0.50–0.50) | undecided | 0.71× ["), rows[2])
        self.assertTrue(rows[2].endswith("| 1.000× |"), rows[2])
        self.assertIn("| met |", rows[3])

    def test_rate_table_medians_with_range(self):
        runs = [ws_run(10, 1000, 1.0, drops=None), ws_run(30, 3000, 3.0, drops=2, saturated=True),
                ws_run(20, 2000, 2.0, drops=1)]
        rows = ws.rate_table({100: {"ref": runs}}, [self.REF], 64)
        self.assertEqual(rows[2], "| 100 (6,400) | ref | 20 (10–30) | 1.0000 | 1.00 (0.50–1.50) | 2.00 (1.00–3.00) | "
                                  "2.0 (1.0–3.0) | 0.90 (0.90–0.90) | 0.40 (0.40–0.40) | 1.0 (1.0–1.0) | 0, 3 | 1 of 3 |")

    def test_ceiling_and_confirmation_lines(self):
        r = ws_run(64_000, 5000, 1.0)
        st = {"ref": {"best": (1000, r), "fail": (1500, {**r, "gen_peak": 0.95}, ["p99 60.0 ms"], True),
                      "trials": [(1000, r, []), (1500, r, ["p99 60.0 ms"])]},
              "sck": {"best": None, "fail": None, "trials": []}}
        confirm = {"ref": (1000, [r, r], 2), "sck": (500, [{**r, "delivered": 32_000}], 1)}
        lines = ws.ceiling_lines(st, confirm, [self.REF, self.SCK])
        self.assertEqual(lines[2], "| ref | 64,000 (1,000) | 5.00 | 1,500: p99 60.0 ms | 0.95 cores (generator-limited: "
                                   "a lower bound) | 1,000: pass; 1,500: p99 60.0 ms |")
        self.assertEqual(lines[3], "| sck | below the first step | – | none up to the top step | – |  |")
        self.assertIn("| ref | 1,000 | 64,000 (64,000–64,000) | 5.00 (5.00–5.00) | 2 of 2 |", lines)
        self.assertEqual(lines[-1], "Reference ceiling ÷ sockudo ceiling (confirmation medians): 2.00×.")


if __name__ == "__main__":
    unittest.main()
