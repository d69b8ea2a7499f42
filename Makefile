# Wheelhouse — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO        ?= go
BIN       := bin/wheelhouse
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X github.com/wheelhouse-dev/wheelhouse/version.Version=$(VERSION) \
             -X github.com/wheelhouse-dev/wheelhouse/version.Commit=$(COMMIT)
LISTEN    ?= 127.0.0.1:8080
DATA_DIR  ?= ./.wheelhouse
TEST_FLAGS ?= -timeout 45m
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TEMPL       := github.com/a-h/templ/cmd/templ@v0.3.1100

.PHONY: help build run kubectl e2e-test conformance generate test lint bench perf perf-api perf-sched perf-agent perf-dash perf-proxy clean agents

help: ## List the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

build: ## Build bin/wheelhouse
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/wheelhouse

agents: ## Cross-build the node agent for linux/amd64 and linux/arm64 into dist/agents (serve them with --agent-binary-dir dist/agents)
	@mkdir -p dist/agents
	for arch in amd64 arm64; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o dist/agents/wheelhouse-linux-$$arch ./cmd/wheelhouse || exit 1; \
	done

run: ## Run the server on its own local PostgreSQL with a local node agent on containerd (installs PostgreSQL, containerd, runc and the CNI plugins first when missing)
	@scripts/ensure-postgres.sh
	@scripts/ensure-runtime.sh
	@$(MAKE) --no-print-directory build
	./$(BIN) server --listen $(LISTEN) --data-dir $(DATA_DIR) --local-agent on

generate: ## Regenerate the dashboard's templ components (web/*_templ.go, checked in)
	rm -f web/*_templ.go   # templ skips files it believes current
	$(GO) run $(TEMPL) generate -path web

kubectl: ## Build the pinned kubectl used by the e2e tests
	@scripts/kubectl.sh

e2e-test: ## Build the pinned upstream e2e.test, the Kubernetes conformance suite
	@scripts/e2e-test.sh

conformance: ## Run upstream's whole conformance suite against a server and two containerd agents (root; hours); writes docs/conformance.md
	@scripts/ensure-postgres.sh
	@scripts/ensure-tools.sh
	@WHEELHOUSE_KUBECTL="$${WHEELHOUSE_KUBECTL:-$$(scripts/kubectl.sh)}" || exit 1; export WHEELHOUSE_KUBECTL; \
	WHEELHOUSE_E2E_TEST="$${WHEELHOUSE_E2E_TEST:-$$(scripts/e2e-test.sh)}" || exit 1; export WHEELHOUSE_E2E_TEST; \
	export WHEELHOUSE_CONFORMANCE=full WHEELHOUSE_CONFORMANCE_REPORT=$(CURDIR)/docs/conformance.md \
		WHEELHOUSE_CONFORMANCE_OUT=$${WHEELHOUSE_CONFORMANCE_OUT:-$(CURDIR)/.cache/conformance}; \
	$(GO) run ./cmd/testenv -- $(GO) test -timeout 8h -count 1 -v -run '^TestConformance$$' ./cmd/wheelhouse

# Tests find kubectl through WHEELHOUSE_KUBECTL and the conformance suite through WHEELHOUSE_E2E_TEST: the pinned
# builds unless the caller already set them.
test: ## Run every test against a throwaway PostgreSQL (installs PostgreSQL, ip, nsenter, curl and Chromium first when missing)
	@scripts/ensure-postgres.sh
	@scripts/ensure-tools.sh
	@scripts/ensure-vm.sh
	@WHEELHOUSE_KUBECTL="$${WHEELHOUSE_KUBECTL:-$$(scripts/kubectl.sh)}" || exit 1; export WHEELHOUSE_KUBECTL; \
	WHEELHOUSE_E2E_TEST="$${WHEELHOUSE_E2E_TEST:-$$(scripts/e2e-test.sh)}" || exit 1; export WHEELHOUSE_E2E_TEST; \
	if [ -n "$$WHEELHOUSE_TEST_DATABASE_URL" ]; then \
		$(GO) test $(TEST_FLAGS) ./... ; \
	else \
		$(GO) run ./cmd/testenv -- $(GO) test $(TEST_FLAGS) ./... ; \
	fi

lint: ## gofmt, generated templ code up to date, go vet (amd64 and arm64), staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@GOBIN=$(CURDIR)/.cache/bin $(GO) install $(TEMPL)
	@tmp=$$(mktemp -d) && cp web/*.templ "$$tmp"/ && .cache/bin/templ generate -path "$$tmp" >/dev/null 2>&1 && \
	for f in web/*.templ; do g=$$(basename "$${f%.templ}_templ.go"); \
		if ! cmp -s "$$tmp/$$g" "web/$$g"; then rm -rf "$$tmp"; \
			echo "web/$$g is not what templ generates from $$f: run make generate and commit it"; exit 1; fi; \
	done; rm -rf "$$tmp"
	$(GO) vet ./...
	GOOS=linux GOARCH=arm64 $(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

bench: ## Go benchmarks of the store, the Kubernetes API, RBAC (real PostgreSQL), the scheduler and the in-cluster API proxy
	@scripts/ensure-postgres.sh
	$(GO) run ./cmd/testenv -- $(GO) test -run '^$$' -bench . -benchmem -count 5 ./store/... ./server/kubeapi/ ./rbac/ ./scheduler/... ./agents/apiproxy/

perf: ## Side-by-side perf harness (store vs etcd vs kine); writes docs/perf.md
	@scripts/ensure-postgres.sh
	cd perf && $(GO) run ./cmd/storeperf --out ../docs/perf.md --json results/perf.json

perf-api: ## Kubernetes API perf harness (watch cache on vs off); writes its section of docs/perf.md
	@scripts/ensure-postgres.sh
	cd perf && $(GO) run ./cmd/apiperf --out ../docs/perf.md --json results/api.json

perf-sched: ## Scheduler perf harness (algorithm alone, end to end, Deployment rollout); writes its section of docs/perf.md
	@scripts/ensure-postgres.sh
	cd perf && $(GO) run ./cmd/schedperf --out ../docs/perf.md --json results/sched.json

perf-agent: ## Node agent perf harness (pod startup on real agents, agent memory, server under hollow nodes; root); writes its section of docs/perf.md
	@scripts/ensure-postgres.sh
	cd perf && $(GO) run ./cmd/agentperf --out ../docs/perf.md --json results/agent.json

perf-dash: ## Dashboard perf harness (write-to-DOM latency in headless Chromium, pods page at 10,000 pods, 200 tabs under churn); writes its section of docs/perf.md
	@scripts/ensure-postgres.sh
	@scripts/ensure-tools.sh
	cd perf && $(GO) run ./cmd/dashperf --out ../docs/perf.md --json results/dash.json

perf-proxy: ## Service proxy and cluster DNS perf harness (nftables full sync and one endpoint change, IPVS in the VM, cluster IP connect latency, DNS queries/s; root); writes its section of docs/perf.md
	@scripts/ensure-vm.sh
	cd perf && $(GO) run ./cmd/proxyperf --out ../docs/perf.md --json results/proxy.json

clean: ## Remove build output (not the data directory)
	rm -rf bin dist
