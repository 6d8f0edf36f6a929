#!/usr/bin/env bash
# GitOps tests (`make gitops-test`, part of `make test`): the Argo CD health scripts against their
# fixtures in Lua 5.1 (Argo CD's gopher-lua dialect) and 5.4, the argocd-cm patch and the kustomize
# tree fresh, the kustomize renders asserted, and mutations proving the checks fail when they should.
# Offline once the tools are installed (apt packages, helm and kustomize through e2e/tools/ensure).
set -euo pipefail
cd "$(dirname "$0")/../.."
source e2e/contract.env  # TOOLS_BIN, where e2e/tools/ensure puts helm and kustomize
export PATH="$TOOLS_BIN:$PATH"
e2e/tools/ensure helm apt:python3-yaml apt:lua5.1 apt:lua5.4
LUAS=(lua5.1 lua5.4)
ARGO=config/gitops/argocd
KUST=config/gitops/kustomize
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=0
pass() { echo "ok   - $*"; }
fail() { echo "FAIL - $*" >&2; failed=$((failed + 1)); }

# kubectl's embedded kustomize when there is a kubectl; else (or with KUSTOMIZE_STANDALONE=1) the
# pinned standalone one.
if [ "${KUSTOMIZE_STANDALONE:-0}" != 1 ] && command -v kubectl >/dev/null; then
  build() { kubectl kustomize "$1"; }
else
  e2e/tools/ensure kustomize
  build() { kustomize build "$1"; }
fi

# 1. Argo CD health scripts: fixtures, server copies identical, argocd-cm patch fresh.
python3 "$ARGO/test_health.py" "${LUAS[@]}" && pass "Argo CD health scripts (fixtures, copies, argocd-cm patch)" \
  || fail "Argo CD health scripts"

# 2. Kustomize: generated files fresh, renders asserted against a fresh chart render.
"$KUST/generate" --check && pass "kustomize generated files are fresh" || fail "kustomize generated files are stale"
if build "$KUST/base" > "$work/base.yaml" && build "$KUST/overlays/sample-run" > "$work/overlay.yaml" \
  && helm template msgbench charts/msgbench --namespace msgbench-system --kube-version 1.34.4 \
    --set images.preloaded=true > "$work/chart.yaml"; then
  python3 "$KUST/test_kustomize.py" "$work/base.yaml" "$work/overlay.yaml" "$work/chart.yaml" . \
    && pass "kustomize base and sample-run overlay render as asserted" || fail "kustomize render assertions"
else
  fail "kustomize build or helm template failed"
fi

# 3. Mutations: each check must catch a regression (otherwise it asserts nothing).
mutant_health() { # mutant_health <what> <file under argocd/> <python edit of text s>
  local what="$1" file="$2" edit="$3"
  rm -rf "$work/argocd" && cp -r "$ARGO" "$work/argocd"
  python3 -c 'import sys; p = sys.argv[1]; s = open(p).read(); exec(sys.argv[2]); open(p, "w").write(s)' \
    "$work/argocd/$file" "$edit"
  # Keep the argocd-cm patch in step with an edited script, so only the fixtures can catch it.
  [ "$file" = argocd-cm-patch.yaml ] || python3 "$work/argocd/generate-cm.py"
  if python3 "$work/argocd/test_health.py" "${LUAS[@]}" >/dev/null 2>&1; then
    fail "health tests missed a mutant: $what"
  else
    pass "health tests catch: $what"
  fi
}
BR=health/msgbench.dev/BenchmarkRun/health.lua
JS=health/msgbench.dev/JetStreamCluster/health.lua
mutant_health "failed run reported Healthy" "$BR" 's = s.replace("hs.status = \"Degraded\"", "hs.status = \"Healthy\"")'
mutant_health "stale generation ignored (run)" "$BR" 's = s.replace("observed < generation", "false")'
mutant_health "warn thresholds fail the run" "$BR" 's = s.replace("if passed == true then", "if passed == true and #unmet_warnings(status.thresholds) == 0 then")'
mutant_health "Ready wins over Degraded" "$JS" 's = s.replace("degraded.status == \"True\"", "degraded.status == \"True\" and condition(status.conditions, \"Ready\").status ~= \"True\"")'
mutant_health "a server copy edited alone" "$JS" 's = s.replace("Rolling out", "Rolling")'
mutant_health "stale argocd-cm patch" argocd-cm-patch.yaml 's = s.replace("hs.status = \"Degraded\"", "hs.status = \"Unknown\"", 1)'
mutant_health "a Lua 5.2+ only construct" "$BR" 's = s.replace("local hs = {}", "local hs = {}\nlocal _ = 7 // 2")'

mutant_render() { # mutant_render <what> <python edit of the overlay's docs list>
  local what="$1" edit="$2"
  python3 - "$work/overlay.yaml" "$work/mutant.yaml" "$edit" <<'PY'
import sys, yaml
docs = [d for d in yaml.load_all(open(sys.argv[1]), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]
run = next(d for d in docs if d["kind"] == "BenchmarkRun")
dep = next(d for d in docs if d["kind"] == "Deployment")
exec(sys.argv[3])
yaml.dump_all(docs, open(sys.argv[2], "w"), Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))
PY
  if python3 "$KUST/test_kustomize.py" "$work/base.yaml" "$work/mutant.yaml" "$work/chart.yaml" . 2>/dev/null; then
    fail "kustomize assertions missed a mutant: $what"
  else
    pass "kustomize assertions catch: $what"
  fi
}
if [ -s "$work/overlay.yaml" ]; then
  mutant_render "run in the operator's namespace" 'run["metadata"]["namespace"] = "msgbench-system"'
  mutant_render "duplicate object" 'docs.append(run)'
  mutant_render "operator image changed" 'dep["spec"]["template"]["spec"]["containers"][0]["image"] = "example.com/operator:latest"'
  mutant_render "run targets a missing server" 'run["spec"]["target"]["serverRef"]["name"] = "nope"'
fi

if [ "$failed" -gt 0 ]; then
  echo "gitops tests: $failed failed" >&2
  exit 1
fi
echo "gitops tests: all passed"
