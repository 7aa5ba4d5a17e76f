# mcp-operator. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/mcp-operator/mcp-operator/internal/version.Version=$(VERSION)

CONTROLLER_GEN := $(BIN)/controller-gen
HELM := $(BIN)/helm
KUSTOMIZE := $(BIN)/kustomize
MKIMAGE := $(BIN)/mkimage
GOLANGCI_LINT := $(BIN)/golangci-lint
# The operator's image; `make images` builds it (and the dev cluster's other
# images) without Docker into bin/images.
IMG ?= localhost/mcp-operator/manager:dev
KUBECTL ?= $(shell command -v kubectl 2>/dev/null || echo $(BIN)/k8s/kubectl)
# kube-apiserver and etcd for envtest, built from Go modules by hack/k8s-binaries.sh.
KUBEBUILDER_ASSETS := $(BIN)/k8s

# go-build-tool builds the target, a tool pinned in the Go module of
# directory $(1), from that module's package $(2): static, paths trimmed,
# stripped; $(3) adds to -ldflags. The rules below build every pinned tool
# this way (not the project's own binaries, nor bin/k8s: hack/k8s does).
go-build-tool = cd $(1) && CGO_ENABLED=0 go build -trimpath -ldflags "$(strip -s -w $(3))" -o $@ $(2)

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods of the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs (config/crd/bases) and RBAC (config/rbac) from markers.
	$(CONTROLLER_GEN) crd rbac:roleName=mcp-operator-manager paths=./api/... paths=./internal/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: docs
docs: manifests ## Generate the API reference (docs/api-reference.md) from the CRDs.
	go run ./hack/apidocs config/crd/bases > docs/api-reference.md

.PHONY: verify
verify: generate manifests docs chart lint ## Fail when a generated file is stale, go.mod is untidy or an import breaks the layering.
	go mod tidy -diff
	cd hack/lint && go mod tidy -diff
	go run ./hack/gitleaksgen -out internal/redact -check
	cd hack/mkimage && go mod tidy -diff
	cd hack/deploytools && go mod tidy -diff
	cd bench/redact && go mod tidy -diff
	cd bench/search && go mod tidy -diff
	cd hack/netpol && go mod tidy -diff
	@if [ -n "$$(git status --porcelain -- api config docs charts go.mod go.sum)" ]; then \
		echo "generated files are stale; run 'make generate manifests docs chart' and commit:"; \
		git status --porcelain -- api config docs charts go.mod go.sum; git diff --stat -- api config docs charts; exit 1; fi
	@echo "generated files are up to date"

.PHONY: lint
lint: $(GOLANGCI_LINT) ## golangci-lint (.golangci.yml): staticcheck, unused, revive and the import-layer rules.
	$(GOLANGCI_LINT) run ./...

.PHONY: fmt
fmt: ## go fmt and go vet.
	go fmt ./...
	go vet ./...

##@ Build

.PHONY: build
build: kubectl-mcp ## Build the manager binary into bin/manager (and the stdio adapter's own binary and the kubectl plugin).
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/manager ./cmd/manager
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/stdio-adapter ./cmd/stdio-adapter

.PHONY: kubectl-mcp
kubectl-mcp: ## Build the kubectl plugin (kubectl mcp) into bin/kubectl-mcp.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-mcp ./cmd/kubectl-mcp

# Where install-kubectl-mcp puts the plugin; kubectl finds kubectl-* on PATH.
PREFIX ?= /usr/local

.PHONY: install-kubectl-mcp
install-kubectl-mcp: kubectl-mcp ## Install the kubectl plugin into $(PREFIX)/bin, so that `kubectl mcp` works.
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN)/kubectl-mcp $(DESTDIR)$(PREFIX)/bin/kubectl-mcp

.PHONY: images
images: build $(BIN)/everything-server $(MKIMAGE) $(BIN)/pause ## Build the container images without Docker into bin/images (docker-archive tarballs).
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/memhog ./test/e2e/memhog
	$(MKIMAGE) -tag localhost/mcp-operator/memhog:dev -out $(BIN)/images/memhog.tar $(BIN)/memhog=/memhog
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/e2e-agent ./test/e2e/agent
	$(MKIMAGE) -tag localhost/mcp-operator/e2e-agent:dev -out $(BIN)/images/e2e-agent.tar $(BIN)/e2e-agent=/agent
	$(MKIMAGE) -tag $(IMG) -out $(BIN)/images/manager.tar $(BIN)/manager=/manager $(BIN)/stdio-adapter=/stdio-adapter
	$(MKIMAGE) -tag localhost/mcp-operator/everything-server:dev -out $(BIN)/images/everything-server.tar $(BIN)/everything-server=/everything-server
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/netcheck ./test/e2e/netcheck
	$(MKIMAGE) -tag localhost/mcp-operator/netcheck:dev -out $(BIN)/images/netcheck.tar $(BIN)/netcheck=/netcheck $(BIN)/everything-server=/everything-server
	$(MKIMAGE) -tag localhost/mcp-operator/pause:dev -user 65535 -out $(BIN)/images/pause.tar $(BIN)/pause=/pause
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/devidp ./cmd/devidp
	$(MKIMAGE) -tag localhost/mcp-operator/devidp:dev -user 65532 -out $(BIN)/images/devidp.tar $(BIN)/devidp=/devidp
	hack/filesystem-image/build.sh $(MKIMAGE) $(BIN)/images/filesystem-server.tar

.PHONY: chart
chart: manifests ## Generate the Helm chart's CRD and RBAC templates from config/crd/bases and config/rbac.
	go run ./hack/chartgen -crds config/crd/bases -rbac config/rbac -admission config/admission -out charts/mcp-operator/templates/generated

.PHONY: helm-lint
helm-lint: $(HELM) ## Lint the Helm chart (strict), with the bridge on and off, the console on, with OAuth, with the dashboard, alerts and tracing on, and with the bridge's TLS, Ingress and Gateway route on.
	$(HELM) lint --strict charts/mcp-operator
	$(HELM) lint --strict charts/mcp-operator --set bridge.publicURL=https://mcp.example.com --set bridge.auth.jwt[0].issuer.url=https://idp.example.com \
		--set bridge.auth.jwt[0].claimMappings.username.claim=email --set bridge.auth.jwt[0].claimMappings.username.prefix=corp: --set bridge.requiredScopes={mcp}
	$(HELM) lint --strict charts/mcp-operator --set bridge.publicURL=https://mcp.example.com --set bridge.oidcIssuerURL=https://idp.example.com --set bridge.authSecrets={idp-client}
	$(HELM) lint --strict charts/mcp-operator --set bridge.enabled=false --set crds.enabled=false
	$(HELM) lint --strict charts/mcp-operator --set console.enabled=true --set console.publicURL=https://console.example.com --set console.oidc.issuerURL=https://idp.example.com
	$(HELM) lint --strict charts/mcp-operator --set dashboard.enabled=true --set prometheusRule.enabled=true --set tracing.endpoint=http://collector:4318
	$(HELM) lint --strict charts/mcp-operator --set bridge.tls.enabled=true --set bridge.tls.secretName=bridge-tls --set bridge.ingress.enabled=true --set bridge.ingress.host=mcp.example.com
	$(HELM) lint --strict charts/mcp-operator --set bridge.tls.enabled=true --set bridge.tls.certManager.issuerRef.name=ca --set bridge.tls.certManager.issuerRef.kind=ClusterIssuer --set bridge.httpRoute.enabled=true --set 'bridge.httpRoute.parentRefs[0].name=gateway'

# The dev cluster's trace collector: Jaeger (hack/cluster/jaeger.yaml), which
# the bridge and the controller send their traces to. On by default only once
# bin/jaeger is built (make peers, or make dev MCP_DEV_TRACING=true): a plain
# first `make dev` does not wait for Jaeger's long build, nor fail with it.
# make e2e always sets it to true.
MCP_DEV_TRACING ?= $(if $(wildcard $(BIN)/jaeger),true,false)

.PHONY: images-jaeger
images-jaeger: $(BIN)/images/jaeger.tar ## Build Jaeger's image (bin/jaeger, from make peers) without Docker into bin/images.

# Rebuilt only when bin/jaeger changes: compressing its 85 MB takes seconds.
$(BIN)/images/jaeger.tar: $(BIN)/jaeger $(MKIMAGE)
	$(MKIMAGE) -tag localhost/mcp-operator/jaeger:dev -out $@ $(BIN)/jaeger=/jaeger

##@ Local cluster and deployment

.PHONY: dev
dev: images $(HELM) $(BIN)/netpol $(if $(filter true,$(MCP_DEV_TRACING)),images-jaeger) ## Run the operator on a local single-node cluster (root, no Docker): cluster, images, chart, samples, Jaeger once bin/jaeger is built (MCP_DEV_TRACING=true|false forces it).
	MCP_DEV_TRACING=$(MCP_DEV_TRACING) hack/cluster/dev.sh

# E2E_LABELS runs only the e2e specs of these Ginkgo labels (a label filter,
# e.g. E2E_LABELS=approvals); empty runs them all.
E2E_LABELS ?=

.PHONY: e2e
e2e: ## End-to-end tests on the local cluster: brings it up (make dev), runs test/e2e (E2E_LABELS=... for some), tears it down.
	@status=0; $(MAKE) dev MCP_DEV_TRACING=true && go test -tags e2e ./test/e2e -count=1 -timeout 20m -v -ginkgo.v -ginkgo.label-filter='$(E2E_LABELS)' || status=$$?; \
		$(MAKE) dev-down; exit $$status

.PHONY: dev-down
dev-down: ## Tear the local cluster down, leaving nothing behind.
	hack/cluster/down.sh

.PHONY: deploy
deploy: $(KUSTOMIZE) ## Install the operator (config/default, image IMG) into the cluster of the current kubeconfig.
	$(KUSTOMIZE) build config/default | sed 's|localhost/mcp-operator/manager:dev|$(IMG)|' | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: $(KUSTOMIZE) ## Remove what `make deploy` installed (CRDs and custom resources included).
	$(KUSTOMIZE) build config/default | $(KUBECTL) delete --ignore-not-found -f -

##@ Test

.PHONY: test
test: envtest-assets peers $(HELM) $(KUSTOMIZE) helm-lint ## Run every test suite (installs what it needs on first run).
	go vet ./...
	KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test ./... -count=1
	cd hack/mkimage && go vet ./... && go test ./... -count=1
	$(MAKE) fuzz
	cd hack/netpol && go vet ./...
	$(MAKE) e2e

# FUZZTIME bounds each fuzz target's run beyond its committed corpus
# (testdata/fuzz): redaction (secret values, tokens of known shapes, the
# bare-token corpus in every wrapping, a Secret value in each encoding), invisible characters, the output
# pipeline, the argument preview, digests' canonical JSON against its
# reference. A count of inputs, not a duration: with a duration, Go 1.26's
# fuzzing coordinator can report its own deadline as a failure when a
# loaded machine keeps a worker busy at the end (fixed in Go 1.27); a
# count has no deadline to race. About 2-8 s each on a quiet
# machine.
FUZZTIME ?= 40000x

.PHONY: fuzz
fuzz: ## Run the redaction, output-pipeline and canonical-JSON fuzz targets for FUZZTIME each (beyond their seeds).
	go test ./internal/redact -run '^$$' -fuzz '^FuzzStringNeverLeaks$$' -fuzztime $(FUZZTIME)
	go test ./internal/redact -run '^$$' -fuzz '^FuzzJSONNeverLeaksSecret$$' -fuzztime $(FUZZTIME)
	go test ./internal/redact -run '^$$' -fuzz '^FuzzBareTokensNeverLeak$$' -fuzztime $(FUZZTIME)
	go test ./internal/redact -run '^$$' -fuzz '^FuzzEncodedSecretNeverLeaks$$' -fuzztime $(FUZZTIME)
	go test ./internal/mcp/invisible -run '^$$' -fuzz '^FuzzStrip$$' -fuzztime $(FUZZTIME)
	go test ./internal/mcpbridge/output -run '^$$' -fuzz '^FuzzPipeline$$' -fuzztime $(FUZZTIME)
	go test ./internal/audit -run '^$$' -fuzz '^FuzzStructurePreview$$' -fuzztime $(FUZZTIME)
	go test ./internal/mcp/canonjson -run '^$$' -fuzz '^FuzzMarshalMatchesReference$$' -fuzztime $(FUZZTIME)

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver and etcd for envtest into bin/k8s (once).
	hack/k8s-binaries.sh etcd kube-apiserver

.PHONY: peers
peers: $(BIN)/everything-server $(BIN)/jaeger test/peers/node_modules/.installed ## Install the real MCP peers the tests use (npm packages, go-sdk everything-server, Jaeger).

# npm ci --prefer-offline reuses the npm cache after the first run.
test/peers/node_modules/.installed: test/peers/package.json test/peers/package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing: install Node.js 20+ and npm (Debian: apt-get install nodejs npm)"; exit 1; }
	cd test/peers && npm ci --prefer-offline --no-audit --no-fund --loglevel=error
	touch $@

$(BIN)/everything-server: test/peers/go/go.mod test/peers/go/go.sum
	$(call go-build-tool,test/peers/go,github.com/modelcontextprotocol/go-sdk/conformance/everything-server)

# The trace collector of the tracing tests: Jaeger v2 all-in-one, pinned in
# hack/jaeger/go.mod by `go get -tool`: a large build, ~2,300 packages and an
# 85 MB binary, first run only (61 min wall measured at nice 19 on a 2-core
# machine shared with a load of 15-25; CPU time not measured). verify does not
# tidy that module: tidying fetches the test dependencies of all of Jaeger,
# which its build never needs.
$(BIN)/jaeger: hack/jaeger/go.mod hack/jaeger/go.sum
	@echo ">> building jaeger from Go modules into bin/ (first run only; several minutes)"
	$(call go-build-tool,hack/jaeger,github.com/jaegertracing/jaeger/cmd/jaeger)

# ToolHive's standalone proxy (thv proxy), pinned in bench/thv/go.mod: the
# peer gateway make bench-bridge compares the bridge with. Bench only.
$(BIN)/thv: bench/thv/go.mod bench/thv/go.sum
	$(call go-build-tool,bench/thv,github.com/stacklok/toolhive/cmd/thv)

##@ Benchmarks

.PHONY: bench
bench: bench-policy bench-authn bench-bridge bench-upstream-creds bench-controller bench-wake bench-redact bench-search bench-console ## Run every benchmark under bench/ (each prints its ratio against a baseline).

.PHONY: bench-bridge
bench-bridge: peers envtest-assets $(BIN)/thv ## The bridge against a direct connection, a bare reverse proxy and ToolHive's proxy, on two upstreams: latency, throughput, CPU, memory; exits 1 on a missed target.
	go run ./bench/bridge

.PHONY: bench-bridge-memory
bench-bridge-memory: envtest-assets ## The idle RSS of a real manager bridge alone (a part of bench-bridge), with where its MB are; exits 1 over 40 MB.
	go run ./bench/bridge -only memory

.PHONY: bench-upstream-creds
bench-upstream-creds: envtest-assets ## A call with each caller's token exchanged upstream (warm cache) against the same call with a shared credential, side by side; a fresh caller's first call; exits 1 over 1.05x.
	go run ./bench/upstreamcreds

.PHONY: bench-controller
bench-controller: envtest-assets peers ## The MCPServer controller (all namespaces, as manager controller runs) bringing up 1,000 remote servers against the bare API work: time to Ready, reconciles, CPU, heap, idle probes; checks the targets.
	go run ./bench/controller

# BENCH_WAKE_FLAGS passes flags to bench/wake (e.g. -servers 50 -wakes 20
# -colds 10 -window 2m).
BENCH_WAKE_FLAGS ?=

.PHONY: bench-wake
bench-wake: ## Sleeping servers on the dev cluster (brings it up, tears it down, also on failure or Ctrl-C): wake to first answer through the bridge against a cold apply, and N sleeping servers' pods, API writes and controller CPU at rest; exits 1 on a missed target.
	@trap 'exit 130' INT TERM; trap '$(MAKE) dev-down' EXIT; \
		$(MAKE) dev && go run ./bench/wake $(BENCH_WAKE_FLAGS)

# SOAK_MINUTES is how long make soak runs its load; SOAK_FLAGS passes flags
# to bench/soak (e.g. -sessions 200 -rate 50 -replicas 3 -kill-every 3m).
SOAK_MINUTES ?= 60
SOAK_FLAGS ?=

.PHONY: soak
soak: ## The dev cluster for SOAK_MINUTES under load and faults (brings it up, tears it down, also on failure or Ctrl-C): calls lost or run twice, audit chains, approvals left, memory slope, latency with and without faults; exits 1 on a lost or twice-run call or an incomplete audit chain.
	@trap 'exit 130' INT TERM; trap '$(MAKE) dev-down' EXIT; \
		$(MAKE) dev && go run ./bench/soak -minutes $(SOAK_MINUTES) $(SOAK_FLAGS)

# REDACT_BASELINE is the commit whose internal/redact bench-redact compares
# against: the redactor before bare tokens and gitleaks' rules were added.
REDACT_BASELINE := 34976b4

.PHONY: bench-redact
bench-redact: ## Redaction of a 10 MiB and a 2 KB result against gitleaks' rules alone, the redactor before them (from git history) and gitleaks' detector; recall on the bare-token corpus and false positives on 50+ MB of this machine's sources and man pages; exits 1 on a missed target.
	@git cat-file -e $(REDACT_BASELINE)^{commit} 2>/dev/null || { \
		echo "bench-redact compares with internal/redact at commit $(REDACT_BASELINE), which this clone lacks: git fetch --unshallow"; exit 1; }
	for f in redact.go shapes.go; do \
		{ echo "// Code generated by make bench-redact from internal/redact/$$f at commit $(REDACT_BASELINE); DO NOT EDIT."; echo; \
		  git show $(REDACT_BASELINE):internal/redact/$$f | \
		  sed -e 's/^package redact$$/package baseline/' -e 's#internal/mcpbridge/rawjson#internal/rawjson#'; } > bench/redact/baseline/$$f || exit 1; \
	done
	cd bench/redact && go run .

.PHONY: bench-search
bench-search: ## Tool search on real servers' tool lists: recall@5 and MRR on the tuning and the held-out query sets, tokens before the first call (whole catalog against search) and in-process find latency on 800 tools; exits 1 on a missed target or a missing reading.
	cd bench/search && go run .

.PHONY: bench-authn
bench-authn: ## Authenticating one request with a warm JWKS: a repeated access token (target p50 <= 10 µs) against TokenReview's cached path, and a token's first full verify (RS256, ES256); exits 1 on a missed target.
	go run ./bench/authn

.PHONY: bench-console
bench-console: envtest-assets ## The console (a real manager console) with 500 pending ToolApprovals and 200 MCPServers: render time and bytes of the approvals and servers pages (p50 <= 50 ms), RSS idle after the start and idle again after 50 people signed in and out (both <= 40 MB), with 10 and 50 people signed in, and after an idle release; exits 1 on a missed target.
	go run ./bench/console

.PHONY: bench-policy
bench-policy: ## One permission decision: the compiled engine against a linear scan (1,000 rules, 5,000 tools).
	go run ./bench/policy

##@ Tools

$(CONTROLLER_GEN): hack/tools/go.mod hack/tools/go.sum
	$(call go-build-tool,hack/tools,sigs.k8s.io/controller-tools/cmd/controller-gen)

# Helm and kustomize from Go modules (hack/deploytools); the version ldflag
# makes `helm version` report the pinned release.
# golangci-lint from its Go module (hack/lint), pinned there.
$(GOLANGCI_LINT): hack/lint/go.mod hack/lint/go.sum
	@echo ">> building golangci-lint from Go modules into bin/ (first run only; a few minutes)"
	$(call go-build-tool,hack/lint,github.com/golangci/golangci-lint/v2/cmd/golangci-lint)

$(HELM): hack/deploytools/go.mod hack/deploytools/go.sum
	@echo ">> building helm from Go modules into bin/ (first run only; a few minutes)"
	$(call go-build-tool,hack/deploytools,helm.sh/helm/v3/cmd/helm,-X helm.sh/helm/v3/internal/version.version=v3.22.0)

$(KUSTOMIZE): hack/deploytools/go.mod hack/deploytools/go.sum
	$(call go-build-tool,hack/deploytools,sigs.k8s.io/kustomize/kustomize/v5)

$(MKIMAGE): hack/mkimage/go.mod hack/mkimage/go.sum $(wildcard hack/mkimage/*.go)
	$(call go-build-tool,hack/mkimage,.)

# NetworkPolicy enforcement of the dev cluster: kube-network-policies, pinned
# in hack/netpol/go.mod, run on the node by hack/cluster/up.sh.
$(BIN)/netpol: hack/netpol/go.mod hack/netpol/go.sum hack/netpol/main.go
	$(call go-build-tool,hack/netpol,.)

$(BIN)/pause: hack/mkimage/pause/main.go
	$(call go-build-tool,hack/mkimage,./pause)
