# msgbench — every entry point. `make demo` and `make test` are the README's Quickstart.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
# e2e/contract.env is the one definition of the project's cache (MSGBENCH_CACHE, by default
# ~/.cache/msgbench), the cluster flavour (CLUSTER: local, the default, a single-node cluster built
# from upstream sources without Docker; kind for Docker users), the kubeconfig, the chart's names,
# ...: bash evaluates it here as in the scripts, with MSGBENCH_CACHE and CLUSTER as given
# (environment or `make CLUSTER=kind`); each key becomes a make variable, exported to every
# recipe (the e2e harness reads them from its environment: e2e/src/cluster/exported.rs).
CONTRACT := $(shell MSGBENCH_CACHE='$(MSGBENCH_CACHE)' CLUSTER='$(CLUSTER)' bash -c 'set -u; . e2e/contract.env && \
  while IFS== read -r k _; do if [[ $$k =~ ^[A-Z_][A-Z0-9_]*$$ ]]; then echo "$$k:=$${!k}"; fi; done < e2e/contract.env')
$(foreach kv,$(CONTRACT),$(eval override $(kv)))
ifeq ($(MSGBENCH_CACHE),)
$(error bash could not evaluate e2e/contract.env)
endif
export $(foreach kv,$(CONTRACT),$(firstword $(subst :=, ,$(kv))))
export PATH := $(TOOLS_BIN):/usr/local/go/bin:$(HOME)/.cargo/bin:$(PATH)
export KUBECONFIG := $(CLUSTER_KUBECONFIG)
# Nodes of the e2e cluster: 1 (the default, what `make test` runs on) or 2-4 (NODES=3 make e2e:
# the multi-node suite, placement and node failure, on nodes that share this machine's CPUs).
export NODES ?= 1

.PHONY: test tools lint fmt-check clippy core-purity docs unit crds crds-check chart-test gitops-test cluster-up \
        cluster-down cluster-status images e2e e2e-check e2e-sockudo demo demo-faults bench bench-operator bench-operator-history \
        plugin-release push chart-push registry-up registry-down workflow-lint machete release-test

## test: everything CI runs — lint, unit tests, CRD freshness, chart checks, GitOps checks, e2e on
## a real cluster.
test: lint unit crds-check chart-test gitops-test release-test e2e

lint: fmt-check clippy core-purity workflow-lint machete docs
## core-purity: the operator's core (operator-core/) links no Kubernetes client, async runtime or
## HTTP stack, so `decide` is pure by construction.
core-purity:
	e2e/tools/core-purity
fmt-check:
	cargo fmt --all -- --check
clippy:
	cargo clippy --workspace --all-targets -- -D warnings
## workflow-lint: actionlint + shellcheck over .github/workflows; a workflow a doc shows equals its file.
workflow-lint:
	e2e/tools/workflow-lint
## docs: the user guide (docs/, mdBook, pinned in e2e/tools/ensure) builds into docs/book
## (git-ignored); docs-anchors, on the built HTML, finds no link to a missing page or file and no
## missing #anchor (web links are not fetched: make lint runs without the network).
docs:
	e2e/tools/ensure mdbook
	mdbook build docs
	e2e/tools/docs-anchors docs/book
## machete: no crate of the workspace declares a dependency it never uses (cargo-machete, pinned
## in e2e/tools/ensure; a false positive is listed, with its reason, under
## [package.metadata.cargo-machete] ignored in that crate's Cargo.toml).
machete:
	e2e/tools/ensure cargo-machete
	cargo machete

## tools: the real peers the integration tests talk to (cached; apt and the Go module proxy), and
## the headless Chromium that renders kubectl msgbench's report in its test, natsprobe (the fault
## test's independent nats.go client), kstatusprobe (kstatus itself, judging the kinds), nft (which sees a partition from outside the pod), capsh
## and jq (e2e/kind/test-runc-bounded). Not sockudo: its first build takes 15-50 min on 2 cores,
## too long for every fresh machine; `make e2e-sockudo`.
tools:
	e2e/tools/ensure nats-server natsprobe kstatusprobe mosquitto helm cargo-nextest apt:chromium apt:nftables apt:libcap2-bin apt:jq

unit: tools
	cargo nextest run --workspace --exclude msgbench-e2e
	cargo test --doc --workspace --exclude msgbench-e2e
# bench/paired.py's statistics are the operator's, run through kubectl-msgbench.
	cargo build -q -p kubectl-msgbench
	python3 bench/test_paired.py
	python3 bench/test_reports.py
	python3 e2e/tools/test_prune_target.py
	e2e/kind/test-runc-bounded

## crds: regenerate what the Rust types define (crdgen, crate msgbench-crdgen): the CRD YAML
## (crds/yaml, the chart, the kustomize base), the user guide's CRD reference
## (docs/src/reference/<kind>.md, from the schemas) and the Argo CD health scripts (from
## config/gitops/argocd/templates, with the failure reasons of RunFailureReason) with their
## argocd-cm patch.
crds:
	cargo run -q -p msgbench-crdgen --bin crdgen -- --write
	config/gitops/kustomize/generate  # the kustomize base carries the chart's CRDs
	config/gitops/argocd/generate-cm.py  # the argocd-cm patch carries the health scripts
crds-check:
	cargo run -q -p msgbench-crdgen --bin crdgen -- --check

chart-test:
	e2e/tools/ensure helm
	charts/test.sh

## release-test: every step of .github/workflows/release.yml that runs off GitHub (versions, pinned
## bases, binary versions against tags, the chart with digests, the krew manifest from a real
## archive, the Dockerfiles' FROM scratch stages with buildah); docs/src/releasing.md.
release-test:
	e2e/release/test

## gitops-test: Argo CD health scripts (Lua) against fixtures, kustomize tree fresh and rendered.
gitops-test:
	config/gitops/test.sh

cluster-up:
	e2e/cluster/up
cluster-down:
	e2e/cluster/down
cluster-status:
	e2e/cluster/status

images:
	e2e/images/build

## push: the images (built as by `make images`, but never loaded into a cluster) to a registry of
## your own: make push REGISTRY=host[:port]/path [TAG=...] -> REGISTRY/msgbench/operator:TAG, ...,
## REGISTRY/msgbench/nats-server:2.15.2 (the chart's images.registry = REGISTRY). TAG (default: the chart's
## appVersion) tags msgbench's own images only. Log in once with `helm registry login HOST`.
## Prints reference@sha256:digest per image, and writes the chart values that pin them by digest
## to VALUES (default msgbench-images.yaml; helm install ... --values msgbench-images.yaml).
VALUES ?= msgbench-images.yaml
push:
	@[ -n "$(REGISTRY)" ] || { echo "make push: REGISTRY=host[:port]/path is required" >&2; exit 2; }
	IMAGES_NO_IMPORT=1 e2e/images/build
	REGISTRY='$(REGISTRY)' TAG='$(TAG)' IMAGES_VALUES='$(VALUES)' e2e/images/push
## chart-push: helm package charts/msgbench, helm push to oci://REGISTRY/charts; prints its digest.
chart-push:
	@[ -n "$(REGISTRY)" ] || { echo "make chart-push: REGISTRY=host[:port]/path is required" >&2; exit 2; }
	REGISTRY='$(REGISTRY)' e2e/images/push chart
## registry-up: a local OCI registry for tests (https://127.0.0.1:5443, htpasswd, throwaway CA);
## `eval "$(e2e/registry/env)"` for its address, user, password and CA. registry-down stops it.
registry-up:
	e2e/registry/up
registry-down:
	e2e/registry/down

## e2e: the suite through cargo-nextest (.config/nextest.toml, profile e2e): first the cluster's
## own smoke checks (cluster_smoke: pinning, sysctls, DNS, Services, volumes; NetworkPolicy on
## kind), which stop it early when the cluster cannot carry it; then with NODES=1 the tests that
## share the cluster several at a time, then the rest of the whole-cluster group one by one, then
## the harness's doc tests; with NODES>1 the multi-node tests only (ignored on one node: the
## single-node ones assume one). JUnit files: $$MSGBENCH_CACHE/e2e-artifacts/junit-<lane>.xml.
e2e: cluster-up images e2e-check
	@# The node has one allocatable CPU and the pinning checks need all of it: free what
	@# `make demo` left running (its results are printed and re-made by the next demo) ...
	kubectl delete namespace msgbench-demo --ignore-not-found --wait --timeout=180s
	@# ... and the namespaces failed tests of an earlier suite kept (their diagnostics are in
	@# $$MSGBENCH_CACHE/e2e-artifacts): their server pods' CPU requests would starve the pinning checks ...
	kubectl delete namespaces -l "$$E2E_NAMESPACE_LABEL=true" --wait --timeout=300s  # none: "No resources found", exit 0
	@# ... and the CPU request of an operator installed with other values (by hand, or by a
	@# demo from before it used the suite's values): install the suite's values (only those,
	@# not the old ones), as its own install does anyway.
	e2e/tools/ensure helm nats kstatusprobe cargo-nextest apt:chromium  # chromium: the variants test screenshots a real report; nats: `nats auth` for endpoint_nats_creds; kstatusprobe: the kstatus module
	if [ -n "$$(kubectl -n "$$CHART_NAMESPACE" get deployment "$$OPERATOR_DEPLOYMENT" --ignore-not-found \
	      -o jsonpath='{.spec.template.spec.containers[*].resources.requests.cpu}')" ]; then \
	  helm upgrade "$$CHART_RELEASE" charts/msgbench -n "$$CHART_NAMESPACE" \
	    --values "$$CHART_E2E_VALUES" --wait --timeout 3m; \
	fi
	$(call e2e_lane,smoke,-E 'test(/^cluster_smoke::/)')
	if [ "$(NODES)" = 1 ]; then \
	  $(call e2e_lane,shared,-E 'not group(whole-cluster)') && \
	  $(call e2e_lane,whole-cluster,-E 'group(whole-cluster) - test(/^cluster_smoke::/)') && \
	  cargo test -p msgbench-e2e --doc; \
	else $(call e2e_lane,multi-node,--run-ignored only); fi

# $(call e2e_lane,NAME,ARGS): one nextest run of the e2e tests; its JUnit file is kept as
# junit-NAME.xml among the artifacts, pass or fail (the next run overwrites nextest's own, which
# is under the workspace's target/nextest/ whatever CARGO_TARGET_DIR says).
e2e_lane = { cargo nextest run -p msgbench-e2e --profile e2e $(2); rc=$$?; \
	mkdir -p "$$E2E_ARTIFACTS" && \
	cp target/nextest/e2e/junit.xml "$$E2E_ARTIFACTS/junit-$(1).xml"; \
	[ $$rc = 0 ]; }

## e2e-check: no cluster needed: the harness's own unit tests (among them: every test the
## whole-cluster group names exists, since a renamed one would quietly run beside the tests it
## disturbs; the lanes it makes; the contract's keys).
e2e-check:
	e2e/tools/ensure cargo-nextest
	cargo nextest run -p msgbench-e2e --lib
	cargo nextest list -p msgbench-e2e --profile e2e -E 'group(whole-cluster)'

## e2e-sockudo: sockudo (built once from crates.io, cached), the runner's pusher tests against the
## real binary, its image, and the scenarios that need it (reference vs sockudo) on the cluster.
e2e-sockudo: cluster-up images
	e2e/tools/ensure sockudo
	cargo test -p bench-runner --test pusher -- --include-ignored
	e2e/images/build sockudo
	e2e/tools/ensure cargo-nextest
	SCENARIO_IMAGES=sockudo SCENARIO_ONLY=sockudo cargo nextest run -p msgbench-e2e --profile e2e \
	  -E 'test(/^scenarios::/)' --no-capture

demo: cluster-up images
	e2e/demo
# R1 vs R2 vs R3 with the stream leader killed mid-run (config/demo-faults; a few minutes).
demo-faults: cluster-up images
	DEMO_DIR=config/demo-faults e2e/demo

bench:
	bench/run
## bench-operator: 50 servers and 200 runs at once on a 3-node local cluster; the operator's
## peak RSS, reconcile errors and durations, writes per object, apply -> first message
## (bench/operator/RESULTS.md; about 15 min).
bench-operator:
	bench/operator/run
## bench-operator-history: 1,000 finished runs of real status sizes (one node); the operator's
## peak RSS and apply -> first message against the empty namespace's, in the same run
## (bench/operator/RESULTS.md, section History).
bench-operator-history:
	bench/operator/run history

## plugin-release: the kubectl plugin's release archive, its sha256 and krew manifest in dist/
## (RELEASE_URL= where the archive is published), checked with krew's validate-krew-manifest
## and installed with krew from the archive.
plugin-release:
	cli/release --check
