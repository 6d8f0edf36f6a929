"""Runs one job of a GitHub Actions workflow here, the way a runner would (e2e/kind/ci-gate).

Before any step runs, the whole job is checked: a key, `uses:`, shell or expression this file
does not implement is refused (exit 3), never approximated. Then the steps run in order:
`run:` in bash (`bash -e {0}`, or `shell: bash`'s `-eo pipefail`), env = workflow < job <
GITHUB_ENV < step, GITHUB_ENV/PATH/OUTPUT/STEP_SUMMARY read back after each step, `if:` with
GitHub's implicit success(), continue-on-error, timeout-minutes (job and step). Exit status: the
exit code of the step that failed the job (0 when it succeeded; 1 when that step had none).
"""
import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from ci_expr import Refused, condition, evaluate, interpolate, parse, placeholders
from ci_expr import text as ci_text

REPO = Path(__file__).resolve().parents[2]
WORKFLOW_KEYS = {"name", "on", "env", "jobs", "permissions"}
JOB_KEYS = {"name", "runs-on", "timeout-minutes", "permissions", "env", "steps"}
STEP_KEYS = {"name", "id", "if", "uses", "with", "run", "env", "working-directory", "shell",
             "continue-on-error", "timeout-minutes"}
SHELLS = {None: ["bash", "-e"], "bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail"]}
# uses: action (without @ref) -> the `with:` inputs its mapping understands.
ACTIONS = {
    "actions/checkout": set(),
    "dtolnay/rust-toolchain": set(),
    "actions/setup-go": {"go-version", "go-version-file", "cache"},
    "helm/kind-action": {"install_only"},
    "actions/upload-artifact": {"name", "path", "if-no-files-found"},
}


def cache_dir():
    return Path(os.environ.get("MSGBENCH_CACHE") or Path.home() / ".cache/msgbench")


def load(path, job_name):
    wf = yaml.safe_load(Path(path).read_text())
    if True in wf:  # YAML 1.1 reads the key `on` as true
        wf["on"] = wf.pop(True)
    refuse_keys(wf, WORKFLOW_KEYS, "the workflow")
    jobs = wf.get("jobs") or {}
    if job_name is None:
        if len(jobs) != 1:
            raise Refused(f"the workflow has jobs {sorted(jobs)}: name one with --job")
        job_name = next(iter(jobs))
    if job_name not in jobs:
        raise Refused(f"no job {job_name!r} (jobs: {sorted(jobs)})")
    for step in jobs[job_name].get("steps") or []:
        if isinstance(step.get("run"), bool):  # GitHub reads `run: true` as the text true
            step["run"] = "true" if step["run"] else "false"
    return wf, job_name, jobs[job_name]


def refuse_keys(obj, allowed, where):
    extra = sorted(set(obj) - allowed)
    if extra:
        raise Refused(f"{where}: {', '.join(map(str, extra))} not supported")


def triggers(wf):
    on = wf.get("on")
    return {on} if isinstance(on, str) else set(on or [])


def action(step):
    return step["uses"].split("@")[0]


def display(step):
    if step.get("name"):
        return step["name"]
    return f"Run {step['uses']}" if "uses" in step else "Run " + step["run"].strip().splitlines()[0]


def check(wf, job, event):
    """Refuses, before anything runs, whatever run_job could not execute faithfully."""
    if event not in triggers(wf):
        raise Refused(f"the workflow is not triggered by {event!r} (on: {sorted(triggers(wf))})")
    refuse_keys(job, JOB_KEYS, "the job")
    ids = set()
    for n, step in enumerate(job.get("steps") or [], 1):
        where = f"step {n} ({display(step)})"
        refuse_keys(step, STEP_KEYS, where)
        if ("run" in step) == ("uses" in step):
            raise Refused(f"{where}: needs exactly one of run: and uses:")
        if "run" in step and step.get("shell") not in SHELLS:
            raise Refused(f"{where}: shell {step['shell']!r} not supported (default or bash)")
        if "uses" in step:
            if action(step) not in ACTIONS:
                raise Refused(f"{where}: uses {step['uses']} is not mapped (mapped: {', '.join(sorted(ACTIONS))})")
            refuse_keys(step.get("with") or {}, ACTIONS[action(step)], f"{where}: with")
            install_only = str((step.get("with") or {}).get("install_only")).lower() == "true"
            if action(step) == "helm/kind-action" and not install_only:
                raise Refused(f"{where}: helm/kind-action is mapped with install_only: true only")
        if not isinstance(step.get("continue-on-error", False), bool):
            raise Refused(f"{where}: continue-on-error must be true or false")
        try:
            trees = [condition(step.get("if", "success()"))]
            trees += [parse(expr) for value in strings(step) for expr in placeholders(value)]
            for t in (t for tree in trees for t in walk(tree)):
                if t[0] == "ctx" and t[1][0] == "steps" and t[1][1] not in ids:
                    raise Refused(f"steps.{t[1][1]}: no earlier step has that id")
        except Refused as e:
            raise Refused(f"{where}: {e}") from None
        if step.get("id"):
            ids.add(step["id"])
    for value in strings({"env": {**(wf.get("env") or {}), **(job.get("env") or {})}}):
        for expr in placeholders(value):
            parse(expr)


def strings(step):
    """The step's values that ${{ }} is substituted in."""
    out = [step.get("run"), step.get("working-directory"), step.get("name")]
    for key in ("env", "with"):
        out += [v for v in (step.get(key) or {}).values()]
    return [v for v in out if isinstance(v, str)]


def walk(tree):
    yield tree
    for t in tree[1:]:
        if isinstance(t, tuple):
            yield from walk(t)


def read_pairs(path):
    """NAME=VALUE and NAME<<DELIM ... DELIM lines, as GITHUB_ENV and GITHUB_OUTPUT hold them."""
    out, lines = {}, Path(path).read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip():
            continue
        m = re.fullmatch(r"([^=<]+)<<(.+)", line)
        if m:
            name, delim, body = m.group(1), m.group(2), []
            while i < len(lines) and lines[i] != delim:
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise Refused(f"{path}: {name}<<{delim} has no closing {delim}")
            i += 1
            out[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
        else:
            raise Refused(f"{path}: line {line!r} is neither NAME=VALUE nor NAME<<DELIM")
    return out


class Runner:
    def __init__(self, wf, job_name, job, workspace, event):
        self.wf, self.job_name, self.job, self.workspace = wf, job_name, job, Path(workspace).resolve()
        self.temp = Path(tempfile.mkdtemp(prefix="ci-gate-"))
        self.out = cache_dir() / "ci-gate"
        self.added_env, self.added_path, self.steps = {}, [], {}
        self.status, self.exit_code = "success", 0
        self.github = {"event_name": event, "event": {}, "workspace": str(self.workspace),
                       "job": job_name, "run_id": str(int(time.time())), "run_number": "1",
                       "repository": "msgbench/msgbench", "actor": os.environ.get("USER", "local"),
                       "server_url": "https://github.com", "sha": git("rev-parse", "HEAD"),
                       "ref": "refs/heads/" + git("rev-parse", "--abbrev-ref", "HEAD"),
                       "token": os.environ.get("GITHUB_TOKEN")}
        self.runner = {"os": "Linux", "arch": "X64", "temp": str(self.temp)}
        timeout = job.get("timeout-minutes", 360)
        self.deadline = time.monotonic() + float(timeout) * 60

    def context(self, step_env):
        """Expression contexts; env = workflow < job < GITHUB_ENV < step, ${{ }} in each level
        resolved against the levels before it (GITHUB_ENV values are taken as written)."""
        ctx = {"env": {}, "steps": self.steps, "github": self.github, "runner": self.runner,
               "job": {"status": self.status}}
        for level in (self.wf.get("env"), self.job.get("env"), None, step_env):
            if level is None:
                ctx["env"].update(self.added_env)
            resolved = {k: interpolate(ci_text(v), ctx) for k, v in (level or {}).items()}
            ctx["env"].update(resolved)
        return ctx

    def process_env(self, ctx, files):
        env = dict(os.environ)
        env.update(ctx["env"])
        # Not GITHUB_ACTIONS=true: tools would take this for GitHub's runner and write its annotations.
        env.update({"CI": "true", "GITHUB_WORKSPACE": str(self.workspace), "GITHUB_JOB": self.job_name,
                    "GITHUB_EVENT_NAME": self.github["event_name"], "GITHUB_SHA": self.github["sha"],
                    "GITHUB_REF": self.github["ref"],
                    "RUNNER_OS": "Linux", "RUNNER_TEMP": str(self.temp), **files})
        env["PATH"] = os.pathsep.join(list(reversed(self.added_path)) + [env.get("PATH", "")])
        return env

    def run(self):
        steps = self.job.get("steps") or []
        print(f"ci-gate: job {self.job_name}, event {self.github['event_name']}, workspace {self.workspace}",
              flush=True)
        results = []
        for n, step in enumerate(steps, 1):
            name = display(step)
            tag = f"[{n}/{len(steps)}] {name}"
            try:
                ctx = self.context({})
                run_it = evaluate(condition(step.get("if", "success()")), ctx)
            except Refused as e:
                run_it, refused = None, e
            if run_it is None:
                print(f"::: {tag}: refused: {refused}", flush=True)
                outcome, code = "failure", 1
            elif not run_it:
                print(f"::: {tag}: skipped (if: {step.get('if', 'success()')})", flush=True)
                results.append((name, "skipped"))
                if step.get("id"):
                    self.steps[step["id"]] = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
                continue
            else:
                print(f"::: {tag}", flush=True)
                start = time.monotonic()
                outcome, code = self.step(step)
                print(f"::: {tag}: {outcome} ({time.monotonic() - start:.1f} s)", flush=True)
            conclusion = "success" if step.get("continue-on-error") else outcome
            if step.get("id"):
                self.steps.setdefault(step["id"], {"outputs": {}})
                self.steps[step["id"]]["outcome"] = outcome
                self.steps[step["id"]]["conclusion"] = conclusion
            results.append((name, outcome if conclusion == outcome else f"{outcome}, continue-on-error"))
            if outcome == "cancelled":
                self.status = "cancelled"
                self.exit_code = self.exit_code or code or 1
            elif conclusion == "failure" and self.status == "success":
                self.status, self.exit_code = "failure", code or 1
        print(f"ci-gate: job {self.job_name}: {self.status}")
        for name, result in results:
            print(f"  {result:<28} {name}")
        summary = self.out / "job-summary.md"
        if summary.exists():
            print(f"ci-gate: step summaries in {summary}")
        shutil.rmtree(self.temp, ignore_errors=True)
        return self.exit_code

    def step(self, step):
        """(outcome, exit code) of one step that runs."""
        if step.get("id"):
            self.steps[step["id"]] = {"outputs": {}}
        files = {}
        for var, fname in (("GITHUB_ENV", "env"), ("GITHUB_PATH", "path"), ("GITHUB_OUTPUT", "output"),
                           ("GITHUB_STEP_SUMMARY", "summary")):
            files[var] = str(self.temp / f"{fname}-{time.monotonic_ns()}")
            Path(files[var]).write_text("")
        try:
            ctx = self.context(step.get("env"))
            env = self.process_env(ctx, files)
            if "uses" in step:
                code = self.action(step, ctx, env)
            else:
                code = self.script(step, ctx, env)
            self.apply(step, files)
        except Refused as e:
            print(f"ci-gate: refused: {e}", flush=True)
            return "failure", 1
        if code == "cancelled":
            return "cancelled", 1
        if code < 0:  # killed by a signal: the shell's 128 + n
            code = 128 - code
        return ("success", 0) if code == 0 else ("failure", code)

    def script(self, step, ctx, env):
        path = self.temp / f"step-{time.monotonic_ns()}.sh"
        path.write_text(interpolate(step["run"], ctx))
        cwd = self.workspace / interpolate(step.get("working-directory", "."), ctx)
        # Once the job is cancelled, what still runs (always(), cancelled()) has only its own limit.
        limit = None if self.status == "cancelled" else max(self.deadline - time.monotonic(), 0)
        if "timeout-minutes" in step:
            own = float(step["timeout-minutes"]) * 60
            limit = own if limit is None else min(limit, own)
        # Its own process group: a timeout or Ctrl-C stops the whole step, and nothing else.
        proc = subprocess.Popen(SHELLS[step.get("shell")] + [str(path)], cwd=cwd, env=env,
                                start_new_session=True)
        try:
            return proc.wait(timeout=limit)
        except (subprocess.TimeoutExpired, KeyboardInterrupt) as e:
            why = "interrupted" if isinstance(e, KeyboardInterrupt) else "timed out"
            print(f"ci-gate: step {why}: stopping its process group {proc.pid}", flush=True)
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            # A job past its deadline (or interrupted) is cancelled; a step past its own fails.
            job_over = self.status != "cancelled" and time.monotonic() >= self.deadline
            return "cancelled" if why == "interrupted" or job_over else 124

    def action(self, step, ctx, env):
        name, inputs = action(step), {k: interpolate(str(v), ctx) for k, v in (step.get("with") or {}).items()}
        if name == "actions/checkout":
            print(f"ci-gate: checkout: no-op, the workspace is this repository ({self.workspace})")
            return 0
        if name in ("dtolnay/rust-toolchain", "actions/setup-go"):
            tool = "cargo" if name == "dtolnay/rust-toolchain" else "go"
            found = shutil.which(tool, path=env["PATH"])
            if not found:
                print(f"ci-gate: {step['uses']}: {tool} is not on PATH (this executor installs no toolchain)")
                return 1
            wanted = inputs.get("go-version") or inputs.get("go-version-file")
            note = f"; the version the step asks for ({wanted}) is not checked" if wanted else ""
            print(f"ci-gate: {step['uses']}: no-op, {tool} is on PATH ({found}){note}")
            return 0
        if name == "helm/kind-action":  # install_only (check): kind on PATH, as the action leaves it
            print(f"ci-gate: {step['uses']} (install_only): e2e/tools/ensure kind, {cache_dir() / 'bin'} on PATH")
            code = subprocess.call([str(REPO / "e2e/tools/ensure"), "kind"], env=env)
            self.added_path.append(str(cache_dir() / "bin"))
            return code
        return self.upload(inputs)

    def upload(self, inputs):
        dest = self.out / inputs["name"]
        shutil.rmtree(dest, ignore_errors=True)
        found = 0
        for pattern in [p.strip() for p in inputs.get("path", "").splitlines() if p.strip()]:
            full = Path(os.path.expanduser(pattern))
            full = full if full.is_absolute() else self.workspace / full
            for match in sorted(glob.glob(str(full), recursive=True)):
                m = Path(match)
                rel = m.relative_to(self.workspace) if m.is_relative_to(self.workspace) else Path(m.name)
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                (shutil.copytree if m.is_dir() else shutil.copy2)(m, dest / rel)
                found += 1
        policy = inputs.get("if-no-files-found", "warn")
        print(f"ci-gate: artifact {inputs['name']}: {found} path(s) copied to {dest}")
        if not found and policy == "error":
            return 1
        return 0

    def apply(self, step, files):
        """What the step wrote to the GITHUB_* files, for the steps after it."""
        self.added_env.update(read_pairs(files["GITHUB_ENV"]))
        self.added_path += [p for p in Path(files["GITHUB_PATH"]).read_text().splitlines() if p.strip()]
        if step.get("id"):
            self.steps[step["id"]]["outputs"].update(read_pairs(files["GITHUB_OUTPUT"]))
        summary = Path(files["GITHUB_STEP_SUMMARY"]).read_text()
        if summary:
            self.out.mkdir(parents=True, exist_ok=True)
            with open(self.out / "job-summary.md", "a") as f:
                f.write(summary)


def git(*args):
    r = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def main(argv=None):
    p = argparse.ArgumentParser(prog="e2e/kind/ci-gate", description=__doc__.splitlines()[0])
    p.add_argument("--workflow", default=str(REPO / ".github/workflows/benchmark-gate.yml"))
    p.add_argument("--job", help="the job to run (default: the workflow's only job)")
    p.add_argument("--event", default="workflow_dispatch", help="github.event_name (default workflow_dispatch)")
    p.add_argument("--workspace", default=str(REPO), help="github.workspace (default: this repository)")
    p.add_argument("--check", action="store_true", help="only check that the job can be run here")
    args = p.parse_args(argv)
    try:
        wf, name, job = load(args.workflow, args.job)
        check(wf, job, args.event)
    except Refused as e:
        print(f"ci-gate: refused: {e}", file=sys.stderr)
        return 3
    if args.check:
        print(f"ci-gate: {args.workflow} job {name}: every step can be run here")
        return 0
    runner = Runner(wf, name, job, args.workspace, args.event)
    (runner.out / "job-summary.md").unlink(missing_ok=True)
    return runner.run()


if __name__ == "__main__":
    sys.exit(main())
