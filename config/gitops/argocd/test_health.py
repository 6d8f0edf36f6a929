#!/usr/bin/env python3
"""Tests of the Argo CD health scripts. Usage: test_health.py <lua interpreter>...

For every fixture tests/<Kind>/<case>.yaml ({expect: {status, messageContains}, object}) the
object's health script health/<group>/<Kind>/health.lua runs in each given interpreter through
harness.lua (global `obj` as Argo CD sets it); the status must be the expected one and the
message must contain every expected piece. Also checked: every script has fixtures, the server
kinds share one script, and argocd-cm-patch.yaml carries exactly the scripts (else it is stale).
"""
import os
import subprocess
import sys

import yaml

# libyaml\'s parser when present: the CRDs are ~370 KB, ~1 s each in pure Python.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

HERE = os.path.dirname(os.path.abspath(__file__))
STATUSES = {"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}
SERVER_KINDS = ("JetStreamCluster", "MqttBroker", "PubSubServer")
CM_KEY = "resource.customizations.health.{group}_{kind}"
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print(f"FAIL - {msg}", file=sys.stderr)


def lua_literal(v):
    """A Python value from YAML as a Lua 5.1 expression (JSON null becomes nil, as in Argo CD)."""
    if v is None:
        return "nil"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        # Every byte but printable ASCII as a decimal escape (UTF-8 stays bytes, as in Lua).
        return '"' + "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:03d}"
                             for b in v.encode("utf-8")) + '"'
    if isinstance(v, list):
        return "{" + ", ".join(lua_literal(x) for x in v) + "}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"[{lua_literal(str(k))}] = {lua_literal(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no Lua literal for {type(v).__name__}")


def run_script(lua, script, obj):
    program = f"obj = {lua_literal(obj)}\nSCRIPT = {lua_literal(script)}\n"
    program += open(os.path.join(HERE, "harness.lua")).read()
    p = subprocess.run([lua, "-"], input=program.encode("ascii"), capture_output=True, timeout=30)
    if p.returncode != 0:
        return None, p.stderr.decode("utf-8", "replace").strip()
    status, _, message = p.stdout.decode("utf-8").partition("\n")
    return status, message


def scripts():
    """{(group, kind): path} of every health.lua."""
    found = {}
    root = os.path.join(HERE, "health")
    for group in sorted(os.listdir(root)):
        for kind in sorted(os.listdir(os.path.join(root, group))):
            path = os.path.join(root, group, kind, "health.lua")
            if os.path.isfile(path):
                found[(group, kind)] = path
    return found


def check_configmap(found):
    cm_path = os.path.join(HERE, "argocd-cm-patch.yaml")
    data = (yaml.load(Loader=_LOADER, stream=open(cm_path)) or {}).get("data") or {}
    want = {CM_KEY.format(group=g, kind=k): open(p).read() for (g, k), p in found.items()}
    for key in sorted(set(want) | set(data)):
        if key not in data:
            fail(f"argocd-cm-patch.yaml lacks {key}: stale, run config/gitops/argocd/generate-cm.py")
        elif key not in want:
            fail(f"argocd-cm-patch.yaml has {key} without a health.lua: stale, run generate-cm.py")
        elif data[key] != want[key]:
            fail(f"argocd-cm-patch.yaml: {key} differs from its health.lua: stale, run generate-cm.py")


def check_fixtures(found, interpreters):
    tests_dir = os.path.join(HERE, "tests")
    tested = set()
    count = 0
    for kind in sorted(os.listdir(tests_dir)):
        for name in sorted(os.listdir(os.path.join(tests_dir, kind))):
            if not name.endswith(".yaml"):
                continue
            where = f"tests/{kind}/{name}"
            doc = yaml.load(Loader=_LOADER, stream=open(os.path.join(tests_dir, kind, name)))
            expect, obj = doc.get("expect") or {}, doc.get("object") or {}
            group = obj.get("apiVersion", "").split("/")[0]
            if obj.get("kind") != kind or expect.get("status") not in STATUSES:
                fail(f"{where}: object.kind must be {kind} and expect.status one of {sorted(STATUSES)}")
                continue
            script = found.get((group, kind))
            if script is None:
                fail(f"{where}: no health script for {group}/{kind}")
                continue
            tested.add((group, kind))
            count += 1
            for lua in interpreters:
                status, message = run_script(lua, script, obj)
                if status is None:
                    fail(f"{where} [{lua}]: the script failed: {message}")
                    continue
                if status != expect["status"]:
                    fail(f"{where} [{lua}]: status {status}, expected {expect['status']} (message: {message!r})")
                for piece in expect.get("messageContains") or []:
                    if piece not in message:
                        fail(f"{where} [{lua}]: message {message!r} lacks {piece!r}")
                if not message or message == "nil":
                    fail(f"{where} [{lua}]: empty message")
    for g, k in sorted(set(found) - tested):
        fail(f"health/{g}/{k}/health.lua has no fixture under tests/{k}/")
    return count


def main():
    interpreters = sys.argv[1:] or ["lua5.4"]
    found = scripts()
    if not found:
        fail("no health scripts found")
    server = {k: open(found[("msgbench.dev", k)]).read() for k in SERVER_KINDS if ("msgbench.dev", k) in found}
    if len(server) != len(SERVER_KINDS):
        fail(f"a health script per server kind expected, found {sorted(server)}")
    elif len(set(server.values())) != 1:
        fail("the server kinds' health.lua differ: all three are templates/server.lua; run `make crds`")
    check_configmap(found)
    count = check_fixtures(found, interpreters)
    print(f"argocd health: {count} fixtures x {len(interpreters)} interpreters, {len(FAILURES)} failures",
          file=sys.stderr)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
