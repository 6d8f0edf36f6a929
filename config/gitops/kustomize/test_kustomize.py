#!/usr/bin/env python3
"""Assertions on the rendered kustomize tree.
Usage: test_kustomize.py <base.yaml> <overlay.yaml> <chart.yaml> <repo root>

base.yaml and overlay.yaml are `kustomize build` output of base/ and overlays/sample-run/;
chart.yaml is a fresh `helm template` of the chart with default values. Prints each broken rule.
"""
import os
import sys

import yaml

# libyaml\'s parser when present: the CRDs are ~370 KB, ~1 s each in pure Python.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

OPERATOR_NS = "msgbench-system"
SAMPLE_NS = "msgbench-sample"
CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
SAMPLES = ("jetstreamcluster.yaml", "benchmarkrun-jetstream-r1.yaml")
FAILURES = []


def check(ok, msg):
    if not ok:
        FAILURES.append(msg)


def load(path):
    with open(path) as f:
        return [d for d in yaml.load_all(Loader=_LOADER, stream=f) if d]


def ident(d):
    md = d.get("metadata", {})
    return (d.get("apiVersion", "").split("/")[0] if "/" in d.get("apiVersion", "") else "",
            d.get("kind"), md.get("namespace"), md.get("name"))


def index(docs, what):
    out = {}
    for d in docs:
        check(ident(d) not in out, f"{what}: duplicate object {ident(d)}")
        out[ident(d)] = d
    return out


def check_namespaces(objs, what, namespace_of):
    for (g, kind, ns, name), d in objs.items():
        if kind in CLUSTER_SCOPED:
            check(ns is None, f"{what}: cluster-scoped {kind} {name} has namespace {ns}")
        else:
            want = namespace_of(d)
            check(ns == want, f"{what}: {kind} {name} in namespace {ns!r}, expected {want!r}")


def check_base(base, chart, repo):
    # Everything the chart installs, unchanged, plus the operator's Namespace.
    for key, d in chart.items():
        check(key in base, f"base lacks the chart's {key[1]} {key[3]}")
        check(key not in base or base[key] == d, f"base's {key[1]} {key[3]} differs from the chart's render")
    extra = sorted(set(base) - set(chart))
    check(extra == [("", "Namespace", None, OPERATOR_NS)], f"base adds only its Namespace, adds {extra}")
    check_namespaces(base, "base", lambda d: OPERATOR_NS)
    # The CRDs are crds/yaml's (the chart's copies are generated from the same types).
    crd_dir = os.path.join(repo, "crds", "yaml")
    for f in sorted(os.listdir(crd_dir)):
        want = yaml.load(Loader=_LOADER, stream=open(os.path.join(crd_dir, f)))
        got = base.get(("apiextensions.k8s.io", "CustomResourceDefinition", None, want["metadata"]["name"]))
        check(got is not None and got.get("spec") == want["spec"], f"base: CRD {want['metadata']['name']} is not crds/yaml/{f}")
    deps = [d for k, d in base.items() if k[1] == "Deployment"]
    check(len(deps) == 1, f"base: one operator Deployment, found {len(deps)}")
    values = yaml.load(Loader=_LOADER, stream=open(os.path.join(repo, "charts/msgbench/values.yaml")))
    app_version = yaml.load(Loader=_LOADER, stream=open(os.path.join(repo, "charts/msgbench/Chart.yaml")))["appVersion"]
    op = values["images"]["operator"]
    image = f"{values['images']['registry'] or op['registry']}/{op['repository']}:{op['tag'] or app_version}"
    for dep in deps:
        images = [c.get("image") for c in dep["spec"]["template"]["spec"]["containers"]]
        check(images == [image], f"base: operator image {images}, expected [{image!r}]")
        sa = dep["spec"]["template"]["spec"].get("serviceAccountName")
        check(("", "ServiceAccount", OPERATOR_NS, sa) in base, f"base: the Deployment's ServiceAccount {sa} is missing")
        for k, b in base.items():
            if k[1] in ("ClusterRoleBinding", "RoleBinding"):
                check(b.get("subjects") == [{"kind": "ServiceAccount", "name": sa, "namespace": OPERATOR_NS}],
                      f"base: {k[1]} {k[3]} binds {b.get('subjects')}, not the operator's ServiceAccount")


def check_overlay(overlay, base, repo):
    for key, d in base.items():
        check(overlay.get(key) == d, f"overlay changes or drops the base's {key[1]} {key[3]}")
    added = {k: d for k, d in overlay.items() if k not in base}
    check_namespaces(added, "overlay", lambda d: SAMPLE_NS)
    check(("", "Namespace", None, SAMPLE_NS) in added, f"overlay: Namespace {SAMPLE_NS} missing")
    for f in SAMPLES:
        sample = yaml.load(Loader=_LOADER, stream=open(os.path.join(repo, "config/samples", f)))
        key = ("msgbench.dev", sample["kind"], SAMPLE_NS, sample["metadata"]["name"])
        got = overlay.get(key)
        check(got is not None, f"overlay: {sample['kind']} {sample['metadata']['name']} (config/samples/{f}) missing")
        if got is not None:
            got = dict(got, metadata={k: v for k, v in got["metadata"].items() if k != "namespace"})
            check(got == sample, f"overlay: {key[1]} {key[3]} differs from config/samples/{f}")
    crd_kinds = {d["spec"]["names"]["kind"] for k, d in overlay.items() if k[1] == "CustomResourceDefinition"}
    for (g, kind, ns, name), d in added.items():
        if g == "msgbench.dev":
            check(kind in crd_kinds, f"overlay: {kind} {name} has no CRD in the render")
        if kind == "BenchmarkRun":
            ref = d["spec"].get("target", {}).get("serverRef", {})
            check(("msgbench.dev", ref.get("kind"), ns, ref.get("name")) in overlay,
                  f"overlay: BenchmarkRun {name} targets {ref}, which the overlay does not create")
    check(any(k[1] == "BenchmarkRun" for k in added), "overlay: no BenchmarkRun")


def main():
    base_path, overlay_path, chart_path, repo = sys.argv[1:5]
    base = index(load(base_path), "base")
    overlay = index(load(overlay_path), "overlay")
    chart = index(load(chart_path), "chart")
    check(len(chart) > 5, f"the chart render has only {len(chart)} objects")
    check_base(base, chart, repo)
    check_overlay(overlay, base, repo)
    for f in FAILURES:
        print(f"FAIL - kustomize: {f}", file=sys.stderr)
    print(f"kustomize: base {len(base)} objects, overlay {len(overlay)}, {len(FAILURES)} failures", file=sys.stderr)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
