"""python3 e2e/kind/test_ci_gate.py: e2e/kind/ci_gate.py runs small workflows as a runner would,
refuses what it does not implement, and can run every step of the real benchmark-gate workflow."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import ci_gate  # noqa: E402
from ci_expr import Refused, condition, evaluate, interpolate, parse  # noqa: E402

REAL = HERE.parents[1] / ".github/workflows/benchmark-gate.yml"


def job(steps, job_extra="", on="workflow_dispatch", job_env="{B: from-job}"):
    return textwrap.dedent(f"""\
        on: [{on}]
        env: {{A: from-workflow}}
        jobs:
          j:
            runs-on: ubuntu-latest
            env: {job_env}
        {textwrap.indent(textwrap.dedent(job_extra), '    ')}
            steps:
        """) + textwrap.indent(textwrap.dedent(steps), "      ")


class Run(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.ws = Path(self.tmp.name) / "ws"
        self.ws.mkdir()
        self.cache = Path(self.tmp.name) / "cache"

    def tearDown(self):
        self.tmp.cleanup()

    def gate(self, workflow, *args):
        wf = Path(self.tmp.name) / "wf.yml"
        wf.write_text(workflow)
        env = {**os.environ, "MSGBENCH_CACHE": str(self.cache)}
        r = subprocess.run([sys.executable, str(HERE / "ci_gate.py"), "--workflow", str(wf),
                            "--workspace", str(self.ws), *args], capture_output=True, text=True, env=env)
        return r.returncode, r.stdout + r.stderr

    def test_a_failing_step_fails_the_job_and_skips_what_needs_success(self):
        code, out = self.gate(job("""\
            - run: touch before
            - name: Gate
              run: exit 2
            - run: touch after
            - if: always()
              run: touch always
            - if: failure()
              run: touch failure
            - if: success()
              run: touch success
            - if: cancelled()
              run: touch cancelled
            """))
        self.assertEqual(code, 2, out)  # the failing step's own exit code
        self.assertEqual(sorted(p.name for p in self.ws.iterdir()), ["always", "before", "failure"])
        self.assertIn("::: [2/7] Gate: failure", out)
        self.assertIn("::: [3/7] Run touch after: skipped", out)
        self.assertIn("ci-gate: job j: failure", out)

    def test_a_green_job_exits_0(self):
        code, out = self.gate(job("- run: true\n- if: failure()\n  run: exit 1\n"))
        self.assertEqual(code, 0, out)
        self.assertIn("ci-gate: job j: success", out)

    def test_github_env_and_path_reach_later_steps_and_env_precedence_holds(self):
        code, out = self.gate(job("""\
            - run: |
                echo "X=one" >> "$GITHUB_ENV"
                echo "B=from-github-env" >> "$GITHUB_ENV"
                printf 'M<<END\\nline 1\\nline 2\\nEND\\n' >> "$GITHUB_ENV"
                mkdir bin && printf '#!/bin/sh\\necho tool ran\\n' > bin/mytool && chmod +x bin/mytool
                echo "$PWD/bin" >> "$GITHUB_PATH"
            - env: {X: from-step}
              run: |
                echo "A=$A B=$B X=$X expr=${{ env.X }} M=[$M]" > seen
                mytool >> seen
            """))
        self.assertEqual(code, 0, out)
        self.assertEqual((self.ws / "seen").read_text(), "A=from-workflow B=from-github-env X=from-step "
                         "expr=from-step M=[line 1\nline 2]\ntool ran\n")

    def test_expressions_in_job_env_resolve_and_later_levels_see_earlier_ones(self):
        code, out = self.gate(job("- env: {C: '${{ env.W }}/c'}\n  run: echo \"$W $C\" > seen\n",
                                  job_env="{W: '${{ github.workspace }}-${{ env.A }}'}"))
        self.assertEqual(code, 0, out)
        self.assertEqual((self.ws / "seen").read_text(), f"{self.ws}-from-workflow {self.ws}-from-workflow/c\n")

    def test_step_outputs_substitute_in_run_env_and_if(self):
        code, out = self.gate(job("""\
            - id: first
              run: |
                echo "word=hello" >> "$GITHUB_OUTPUT"
                printf 'many<<EOF\\na\\nb\\nEOF\\n' >> "$GITHUB_OUTPUT"
            - env: {W: "${{ steps.first.outputs.word }}"}
              run: echo "${{ steps.first.outputs.word }} $W ${{ steps.first.outputs.many }}" > seen
            - if: steps.first.outputs.word == 'HELLO' && steps.first.outcome == 'success'
              run: touch if-ran
            - if: steps.first.outputs.missing != ''
              run: touch must-not-run
            """))
        self.assertEqual(code, 0, out)
        self.assertEqual((self.ws / "seen").read_text(), "hello hello a\nb\n")
        self.assertTrue((self.ws / "if-ran").exists())  # GitHub compares strings ignoring case
        self.assertFalse((self.ws / "must-not-run").exists())

    def test_unsupported_expressions_are_refused_before_anything_runs(self):
        for cond in ("contains(github.ref, 'main')", "hashFiles('x') != ''", "github.run_attempt > 1",
                     "secrets.TOKEN == 'x'", "matrix.os == 'linux'", "always() || unknown()",
                     "github.event_name == 'push' || toJSON(env)"):
            with self.subTest(cond=cond):
                code, out = self.gate(job(f"- run: touch ran\n- if: {cond}\n  run: true\n"))
                self.assertEqual(code, 3, out)
                self.assertRegex(out, r"refused: .*(is not supported|unsupported (operator|syntax))")
                self.assertFalse((self.ws / "ran").exists())

    def test_unsupported_uses_keys_and_shells_are_refused(self):
        cases = {
            "- uses: actions/cache@v4\n  with: {path: x, key: y}\n": "actions/cache@v4 is not mapped",
            "- uses: helm/kind-action@v1\n": "install_only: true only",
            "- uses: actions/checkout@v4\n  with: {ref: other}\n": "ref not supported",
            "- run: echo\n  shell: python\n": "shell 'python' not supported",
            "- run: echo ${{ steps.later.outputs.x }}\n- id: later\n  run: true\n": "no earlier step",
            "- run: true\n  continue-on-error: ${{ env.A == 'x' }}\n": "continue-on-error must be",
        }
        for steps, why in cases.items():
            with self.subTest(why=why):
                code, out = self.gate(job("- run: touch ran\n" + steps))
                self.assertEqual(code, 3, out)
                self.assertIn(why, out)
                self.assertFalse((self.ws / "ran").exists())
        code, out = self.gate(job("- run: true\n", job_extra="strategy: {matrix: {x: [1]}}"))
        self.assertEqual(code, 3, out)
        self.assertIn("the job: strategy not supported", out)

    def test_continue_on_error_keeps_the_job_green(self):
        code, out = self.gate(job("""\
            - id: flaky
              continue-on-error: true
              run: exit 5
            - run: echo "${{ steps.flaky.outcome }} ${{ steps.flaky.conclusion }}" > seen
            - if: failure()
              run: touch failure
            """))
        self.assertEqual(code, 0, out)
        self.assertEqual((self.ws / "seen").read_text(), "failure success\n")
        self.assertFalse((self.ws / "failure").exists())

    def test_default_shell_is_bash_e_and_shell_bash_adds_pipefail(self):
        code, _ = self.gate(job("- run: false | true\n"))
        self.assertEqual(code, 0)
        code, _ = self.gate(job("- run: false | true\n  shell: bash\n"))
        self.assertEqual(code, 1)

    def test_working_directory_and_step_timeout(self):
        (self.ws / "sub").mkdir()
        code, out = self.gate(job("""\
            - working-directory: sub
              run: touch here
            - timeout-minutes: 0.02
              run: sleep 30
            - if: always()
              run: touch after
            """))
        self.assertEqual(code, 124, out)
        self.assertTrue((self.ws / "sub/here").exists())
        self.assertTrue((self.ws / "after").exists())
        self.assertIn("step timed out", out)

    def test_a_job_past_its_timeout_is_cancelled_and_only_always_or_cancelled_steps_run(self):
        code, out = self.gate(job("""\
            - run: sleep 30
            - if: always()
              run: touch always
            - if: failure()
              run: touch failure
            - if: cancelled()
              run: touch cancelled
            """, job_extra="timeout-minutes: 0.02"))
        self.assertEqual(code, 1, out)
        self.assertIn("ci-gate: job j: cancelled", out)
        self.assertEqual(sorted(p.name for p in self.ws.iterdir()), ["always", "cancelled"])

    def test_event_decides_pull_request_only_steps(self):
        steps = "- if: github.event_name == 'pull_request'\n  run: touch pr\n"
        code, out = self.gate(job(steps, on="pull_request, workflow_dispatch"))
        self.assertEqual(code, 0, out)
        self.assertFalse((self.ws / "pr").exists())
        code, out = self.gate(job(steps, on="pull_request, workflow_dispatch"), "--event", "pull_request")
        self.assertEqual(code, 0, out)
        self.assertTrue((self.ws / "pr").exists())
        code, out = self.gate(job(steps), "--event", "push")
        self.assertEqual(code, 3, out)
        self.assertIn("not triggered by 'push'", out)

    def test_upload_artifact_copies_into_the_cache_and_summaries_collect(self):
        code, out = self.gate(job("""\
            - run: |
                mkdir -p out/deep && echo j > junit.xml && echo d > out/deep/f.txt
                echo "## verdict" >> "$GITHUB_STEP_SUMMARY"
            - uses: actions/upload-artifact@v4
              with:
                name: results
                path: |
                  junit.xml
                  out/**/*.txt
                  missing.html
                if-no-files-found: ignore
            - uses: actions/upload-artifact@v4
              with: {name: none, path: nothing-here, if-no-files-found: error}
            """))
        self.assertEqual(code, 1, out)
        got = self.cache / "ci-gate/results"
        self.assertEqual((got / "junit.xml").read_text(), "j\n")
        self.assertEqual((got / "out/deep/f.txt").read_text(), "d\n")
        self.assertEqual((self.cache / "ci-gate/job-summary.md").read_text(), "## verdict\n")


class Expressions(unittest.TestCase):
    CTX = {"env": {"N": "3"}, "steps": {}, "github": {"event_name": "workflow_dispatch", "event": {}},
           "runner": {}, "job": {"status": "failure"}}

    def test_github_semantics(self):
        ev = lambda e: evaluate(parse(e), self.CTX)  # noqa: E731
        self.assertEqual(ev("env.N == 3"), True)  # mixed types compare as numbers
        self.assertEqual(ev("'' || 'fallback'"), "fallback")  # || and && yield an operand
        self.assertEqual(ev("env.N && 'x'"), "x")
        self.assertEqual(ev("!(github.event.pull_request.number)"), True)  # a missing property is null
        self.assertEqual(ev("!failure() == false"), True)  # ! binds tighter than ==
        self.assertEqual(interpolate("n=${{ env.N }} ${{ env.NONE }}.", self.CTX), "n=3 .")

    def test_if_without_a_status_function_implies_success(self):
        self.assertFalse(evaluate(condition("github.event_name == 'workflow_dispatch'"), self.CTX))
        always = condition("${{ always() && github.event_name == 'workflow_dispatch' }}")
        self.assertTrue(evaluate(always, self.CTX))

    def test_github_token_only_from_the_environment(self):
        with self.assertRaises(Refused):
            evaluate(parse("github.token"), {**self.CTX, "github": {"token": None}})


class RealWorkflow(unittest.TestCase):
    """The workflow docs/ci-gate.md shows may only use what the executor runs."""

    def test_every_uses_is_mapped_and_every_if_evaluates(self):
        wf, name, job = ci_gate.load(REAL, None)
        ci_gate.check(wf, job, "workflow_dispatch")
        steps = job["steps"]
        for step in steps:
            if "uses" in step:
                self.assertIn(ci_gate.action(step), ci_gate.ACTIONS, step["uses"])
            for status in ("success", "failure", "cancelled"):
                for event in ("workflow_dispatch", "pull_request"):
                    ctx = {"env": {}, "steps": {}, "github": {"event_name": event, "event": {}},
                           "runner": {}, "job": {"status": status}}
                    got = evaluate(condition(step.get("if", "success()")), ctx)
                    self.assertIsInstance(got, bool, (step.get("if"), status, event))
        comment = [s for s in steps if "gh pr comment" in s.get("run", "")]
        self.assertEqual(len(comment), 1)
        ctx = {"env": {}, "steps": {}, "github": {"event_name": "workflow_dispatch"}, "runner": {},
               "job": {"status": "success"}}
        self.assertFalse(evaluate(condition(comment[0]["if"]), ctx))  # never run outside GitHub

    def test_the_wrapper_accepts_it(self):
        r = subprocess.run([sys.executable, str(HERE / "ci_gate.py"), "--check"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
