# jetqueue — build, test, benchmark, lint every module of the workspace.
# Every module of the workspace.
MODULES := libs cmd/jqctl services/admission services/ingest services/preemptor services/podsready services/scorer deploy e2e
GO ?= go
FUZZTIME ?= 10s
# FuzzHandlers runs for a count of inputs: each takes a quarter second, and
# a time limit can end the run while a worker is mid-input, which go test
# reports as "context deadline exceeded".
FUZZHANDLERS ?= 40x
BIN := bin

.PHONY: build run test unit e2e conformance fuzz bench bench-e2e lint fmt vet chaos

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

## chaos: the fault-injection suite (e2e/chaos, also part of e2e for 75s) for
## longer: CHAOS_DURATION of load (default 10m); CHAOS_SEED replays a run.
chaos:
	cd e2e && CHAOS_DURATION=$${CHAOS_DURATION:-10m} $(GO) test -count=1 -v -run 'TestChaos$$' -timeout 60m ./chaos

## fuzz: each fuzz target briefly (go test -fuzz takes one target per
## package per run): decoding, event parsing, the engine under random
## event sequences, the HTTP handlers, the CLI's score vectors.
fuzz:
	cd libs && $(GO) test -run='^$$' -fuzz='^FuzzDecode$$' -fuzztime=$(FUZZTIME) ./api
	cd libs && $(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) ./events
	cd libs && $(GO) test -run='^$$' -fuzz='^FuzzEngine$$' -fuzztime=$(FUZZTIME) ./engine
	cd services/ingest && $(GO) test -run='^$$' -fuzz='^FuzzHandlers$$' -fuzztime=$(FUZZHANDLERS) ./ingest
	cd cmd/jqctl && $(GO) test -run='^$$' -fuzz='^FuzzScoreVector$$' -fuzztime=$(FUZZTIME) .

bench:
	cd libs && $(GO) test -run='^$$' -bench=. -benchmem ./engine ./scheduler ./store ./scoring

## bench-e2e: 20,000 workloads over NATS through the whole pipeline.
bench-e2e:
	cd e2e && $(GO) test -run='^$$' -bench=EndToEnd -benchtime=1x -timeout 20m .

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
