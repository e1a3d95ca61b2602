# jetqueue — build, test, benchmark, lint every module of the workspace.
# Every module of the workspace.
MODULES := libs cmd/jqctl services/admission services/ingest services/preemptor services/podsready services/scorer deploy e2e
GO ?= go
# Each fuzz target runs for a count of inputs, about 10 s of fuzzing each
# on 2 cores, not for a time: when a -fuzztime duration ends while a worker
# is mid-input, go1.26's fuzz coordinator can fail the run with "context
# deadline exceeded" and no failing input (golang/go#75804). FUZZTIME
# (a duration or a count, e.g. 150s or 100000x) runs every target for
# that instead; FuzzHandlers' inputs take a quarter second each.
FUZZTIME ?=
FUZZHANDLERS ?= 40x
fuzztime = $(or $(FUZZTIME),$(1))
BIN := bin

.PHONY: build run test unit e2e conformance fuzz bench bench-decode bench-latency bench-e2e bench-console bench-eta bench-memory bench-restart bench-vs-kueue bench-shards console-screenshot lint fmt vet chaos chaos-cluster services-vs-simulator

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/jqctl ./cmd/jqctl
	$(GO) build -o $(BIN)/admission ./services/admission
	$(GO) build -o $(BIN)/ingest ./services/ingest
	$(GO) build -o $(BIN)/preemptor ./services/preemptor
	$(GO) build -o $(BIN)/podsready ./services/podsready
	$(GO) build -o $(BIN)/scorer ./services/scorer
	@for m in $(MODULES); do (cd $$m && $(GO) build ./...) || exit 1; done

## test: everything CI runs — lint, unit and property tests, every conformance
## scenario through `jqctl simulate`, and a short fuzz of the decoder.
test: lint unit e2e fuzz

unit:
	@for m in $(filter-out e2e,$(MODULES)); do echo "== go test $$m"; (cd $$m && $(GO) test -count=1 ./...) || exit 1; done

## e2e: every conformance scenario through real NATS, PostgreSQL and the five services.
e2e:
	cd e2e && $(GO) test -count=1 -parallel 6 -timeout 20m ./...

## conformance: every scenario in conformance/ through `jqctl simulate` (also part of unit).
conformance:
	cd cmd/jqctl && $(GO) test -count=1 -run 'TestConformance' -v . | grep -E '^(=== RUN|--- |\s+---|PASS|FAIL|ok)' 

## services-vs-simulator: AGREE_COUNT random scenarios from the difftest
## generator (profile all, seed AGREE_SEED, only those Kueue settles, so
## ORACLE is built when missing) played on the whole system and checked, at
## every expect step, against the simulator's run of the same file to rest
## (as admission decides); AGREE_SHARDS=N runs admission as N shards. Not
## part of `make test`: about two seconds per scenario on 2 cores.
AGREE_SEED ?= 1
AGREE_COUNT ?= 100
AGREE_SHARDS ?=
services-vs-simulator:
	@[ -x "$(ORACLE)" ] || $(DIFFTEST)/oracle/build.sh $(abspath $(ORACLE))
	rm -rf $(BIN)/agree && python3 $(DIFFTEST)/gen-scenarios.py --seed $(AGREE_SEED) --count $(AGREE_COUNT) \
		--profile all --out $(abspath $(BIN))/agree --oracle $(abspath $(ORACLE))
	cd e2e && JQ_AGREE_DIR=$(abspath $(BIN))/agree JQ_AGREE_SHARDS=$(AGREE_SHARDS) $(GO) test -count=1 -parallel 3 -timeout 120m \
		-run '^TestServicesAgreeWithSimulator$$' .

## chaos: the fault-injection suite (e2e/chaos, also part of e2e for 75s) for
## longer: CHAOS_DURATION of load (default 10m); CHAOS_SEED replays a run.
chaos:
	cd e2e && CHAOS_DURATION=$${CHAOS_DURATION:-10m} $(GO) test -count=1 -v -run 'TestChaos$$' -timeout 60m ./chaos

## chaos-cluster: the suite on a three-server JetStream cluster, every
## stream and bucket at R3 (e2e/chaos TestChaosCluster, also part of e2e
## with two faults): every NATS fault (stream leader and follower killed,
## a server stopped 30s, a stepdown, quorum lost 20s, all restarted) and
## the process faults, asserting recovery within 10s of each.
## CHAOS_DURATION of load (default 5m); CHAOS_SEED replays a run.
chaos-cluster:
	cd e2e && CHAOS_CLUSTER=long CHAOS_DURATION=$${CHAOS_DURATION:-5m} $(GO) test -count=1 -v -run 'TestChaosCluster$$' -timeout 60m ./chaos

## fuzz: each fuzz target briefly (go test -fuzz takes one target per
## package per run): decoding, the one-pass YAML reader against
## sigs.k8s.io/yaml, the scenario's one-scan JSON reading against the
## reference, event parsing, the engine under random event sequences, the
## HTTP handlers, the CLI's score vectors.
fuzz:
	cd libs && $(GO) test -run='^$$' -fuzz='^FuzzDecode$$' -fuzztime=$(call fuzztime,60000x) ./api
	cd libs && $(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(call fuzztime,80000x) ./events
	cd libs && $(GO) test -run='^$$' -fuzz='^FuzzEngine$$' -fuzztime=$(call fuzztime,500x) ./engine
	cd libs && $(GO) test -run='^$$' -fuzz='^FuzzAgrees$$' -fuzztime=$(call fuzztime,300000x) ./yamljson
	cd libs && $(GO) test -run='^$$' -fuzz='^FuzzParseFastJSON$$' -fuzztime=$(call fuzztime,100000x) ./sim
	cd services/ingest && $(GO) test -run='^$$' -fuzz='^FuzzHandlers$$' -fuzztime=$(FUZZHANDLERS) ./ingest
	cd cmd/jqctl && $(GO) test -run='^$$' -fuzz='^FuzzScoreVector$$' -fuzztime=$(call fuzztime,50000x) .

## bench: the benchmarks; ./sim runs the 20k-workload load of bench-vs-kueue
## on the core alone and prints its CPU time (cpu-s/op); then
## bench-vs-kueue, the ratio to Kueue's own scheduler.
bench:
	cd libs && $(GO) test -run='^$$' -bench=. -benchmem ./engine ./scheduler ./store ./scoring ./sim
	$(MAKE) bench-vs-kueue

## bench-vs-kueue: jqctl simulate against Kueue v0.6.3's scheduler (the
## difftest oracle) on big-scenario.py's 20,000 workloads in 3 waves, without
## and with preemption: medians of VS_KUEUE_RUNS paired runs, CPU time and
## ratio, outputs checked identical. ORACLE is built with the shared script
## when missing. Not part of `make test`.
ORACLE ?= $(BIN)/oracle
DIFFTEST ?= ../shared/difftest
VS_KUEUE_RUNS ?= 5
bench-vs-kueue:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/jqctl ./cmd/jqctl
	@[ -x "$(ORACLE)" ] || $(DIFFTEST)/oracle/build.sh $(abspath $(ORACLE))
	bench/vs-kueue.sh $(BIN)/jqctl $(ORACLE) $(DIFFTEST) $(VS_KUEUE_RUNS)

## bench-memory: the engine's heap per pending and per admitted workload,
## and the heap over a long run of submit, admit, finish and expiry; then
## the whole system in one process under aggressive retention
## (MEMORY_ROUNDS rounds of 100): heap and JQ_EVENTS' size (flat = bounded).
bench-memory:
	cd libs && $(GO) test -run='^$$' -bench='^BenchmarkMemory$$' -benchtime=1x -v ./engine | grep -vE '^(goos|goarch|pkg|cpu):'
	cd e2e && $(GO) test -run='^$$' -bench='^BenchmarkMemoryServices$$' -benchtime=1x -timeout 30m -v . | grep -vE '^(goos|goarch|pkg|cpu):'

## bench-shards: admitted/s of a burst (SHARDS_WORKLOADS, default 6000) to
## 40 ClusterQueues in 20 independent cohorts with one admission shard and
## with two, interleaved in one run. Not part of `make test`.
bench-shards:
	cd e2e && $(GO) test -count=1 -run='^$$' -bench='^BenchmarkShards$$' -benchtime=1x -timeout 30m . | grep -vE '^(goos|goarch|pkg|cpu):'

## bench-eta: the ETA's error against a recorded run's admissions (median
## and p90 absolute error, in minutes); see docs/console.md.
bench-eta:
	cd libs && $(GO) test -run='^$$' -bench='^BenchmarkETAError$$' -benchtime=1x -timeout 30m ./eta

## bench-console: the console over 100,000 workloads (CONSOLE_WORKLOADS):
## each view's API calls for its first render (latency cold and warm,
## bytes) and, with chromium and playwright-core, each view's first render
## in the browser; see docs/console.md.
bench-console:
	cd e2e && $(GO) test -run='^$$' -bench='^BenchmarkConsole100k$$' -benchtime=1x -timeout 60m -v . | grep -vE '^(goos|goarch|pkg|cpu):'

## console-screenshot: docs/console.png and docs/console-pending.png, taken
## by the console's browser test.
console-screenshot:
	cd e2e && JQ_README_SHOT=$(CURDIR)/docs/console.png $(GO) test -count=1 -run '^TestConsoleInBrowser$$' .

## bench-decode: the one decode against the decode before it, as CPU on the
## same input: 1,000 workloads as YAML and JSON, one workload as JSON, and
## the difftest's 20k-workload scenario (python3; SHARED=path of shared/).
SHARED ?= ../shared

bench-decode:
	cd libs && $(GO) test -run='^$$' -bench=Decode ./api
	python3 $(SHARED)/difftest/big-scenario.py --workloads 20000 --waves 3 --seed 7 > /tmp/jq-big-20000.yaml
	cd libs && JQ_SCENARIO=/tmp/jq-big-20000.yaml $(GO) test -run='^$$' -bench=Parse -benchtime=3x ./sim

## bench-latency: submit→QuotaReserved p50/p90/p99 at a steady 200/s and
## 1,000/s for 60 s each (JQ_LATENCY_DURATION), over HTTP and JQ_SUBMIT:
## first with every service in one process, then with nats-server,
## PostgreSQL and each service as its own process (JQ_LATENCY_ONLY=http-1000
## runs one of the four in each; JQ_LATENCY_PROFILE=DIR writes a CPU profile
## of each service process there).
bench-latency:
	cd e2e && $(GO) test -run='^$$' -bench='^BenchmarkSteadyLatency$$' -benchtime=1x -timeout 30m .
	cd e2e && $(GO) test -run='^$$' -bench='^BenchmarkSteadyLatencyProcesses$$' -benchtime=1x -timeout 40m ./chaos

## bench-e2e: 20,000 workloads over NATS through the whole pipeline;
## admitted/s against a bare 3-hop chain, and the NATS server's messages
## per admitted workload (in all and by connection) against per event of
## the chain, and CPU per admitted workload (this process, PostgreSQL)
## against per message through the chain; JQ_BURST_PROFILE=FILE writes a
## CPU profile of the burst.
bench-e2e:
	cd e2e && $(GO) test -run='^$$' -bench=EndToEnd -benchtime=1x -timeout 20m .

## bench-restart: admission catching up over a log of 1,000,000 events
## (BENCH_RESTART_EVENTS), without a snapshot and with one (restore phases,
## CPU time, RSS, the 10s target), and the projection rebuild over the
## same log. BENCH_RESTART_FULL_EVENTS=N
## runs the case without a snapshot over a smaller log of N events.
bench-restart:
	cd e2e && $(GO) test -run='^$$' -bench='^BenchmarkRestart$$' -benchtime=1x -timeout 60m .

lint: fmt vet
	cd libs && $(GO) test -count=1 ./purity

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

## run: jetqueue on this machine with the demo setup (Ctrl-C stops it).
run: build
	$(BIN)/jqctl dev --demo
