#!/usr/bin/env python3
"""prune-target keeps every hash of a crate's newest build and drops earlier builds' ones."""
import importlib.machinery
import importlib.util
import os
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
loader = importlib.machinery.SourceFileLoader("prune_target", os.path.join(HERE, "prune-target"))
spec = importlib.util.spec_from_loader("prune_target", loader)
prune = importlib.util.module_from_spec(spec)
loader.exec_module(prune)


class PruneDeps(unittest.TestCase):
    def test_live_variants_stay_and_earlier_builds_go(self):
        with tempfile.TemporaryDirectory() as deps:
            now = time.time()

            def artifact(name, age_hours):
                path = os.path.join(deps, name)
                with open(path, "w") as f:
                    f.write("x" * 10)
                t = now - age_hours * 3600
                os.utime(path, (t, t))

            # serde: check, build and a feature variant, all from one build a month ago.
            for h in ("0000000000000001", "0000000000000002", "0000000000000003"):
                artifact(f"libserde-{h}.rmeta", 24 * 30)
            # operator: this build's lib + test, and an earlier clone's lib.
            artifact("libmsgbench_operator-00000000000000aa.rlib", 0)
            artifact("msgbench_operator-00000000000000bb", 0.5)
            artifact("libmsgbench_operator-00000000000000cc.rlib", 26)
            freed = prune.prune_deps(deps)
            left = sorted(os.listdir(deps))
            self.assertEqual(freed, 10)
            self.assertNotIn("libmsgbench_operator-00000000000000cc.rlib", left)
            self.assertEqual(len(left), 5, left)


if __name__ == "__main__":
    unittest.main()
