# cotenant: `make demo` runs the main job, `make test` runs every test of every language.
# Both fetch what they need (crates from the registry; rustfmt and clippy through rustup).

CARGO ?= cargo
RELEASE_BIN := target/release/cotenant
# Go: on the PATH, else where the official archive installs it.
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
GOENV := GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local

.PHONY: test demo toolchain fmt-check clippy unit loom go-test c-abi examples metrics-check deploy-check cargo-install-check fallback msrv miri package fuzz bench bench-pool sim-validate policy-sim lab clean

test: toolchain fmt-check clippy unit loom go-test c-abi examples metrics-check deploy-check install-check cargo-install-check fallback msrv miri package

# The headline experiment: P = 2 processes on this host at four loads, four pools, a picture of
# the tail latencies against the load and a verdict per pool (about 2.5 minutes after the build).
demo: toolchain
	$(CARGO) build --release --locked -p cotenant-cli -p cotenant-preload
	$(RELEASE_BIN) cpus --explain
	$(RELEASE_BIN) lab headline --out lab-results

# Rust comes with the machine image; the components may not.
toolchain:
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }
	@$(CARGO) fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	@$(CARGO) clippy --version >/dev/null 2>&1 || rustup component add clippy

fmt-check:
	$(CARGO) fmt --all --check

clippy:
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

# Unit tests, fixture vectors, doc tests, and the real-cgroup integration tests (they skip,
# saying why, where the process is not root or has no writable cgroup file system).
unit:
	$(CARGO) test --workspace --locked

# loom models (crates/cotenant/src/pool/tests/loom_*.rs: the pool's park/wake protocol, Task
# as a future and joined, borrowing, elastic retirement, the CPU budget's refill, a spawned
# future's run state) and of wait::Signal/Event (crates/cotenant/src/wait/loom_event.rs), built
# in their own target directory so they do not invalidate the normal build. `pool::loom_`
# selects every pool model.
loom:
	RUSTFLAGS="--cfg loom" $(CARGO) test --locked -p cotenant --lib --release --target-dir target/loom -- pool::loom_ wait::loom_event

# The Go package (go/): its own module, no dependencies; gofmt, vet and tests.
go-test:
	@[ -x "$(GO)" ] || { echo "go-test: SKIPPED: go not found (install Go 1.25 or later, https://go.dev/dl)"; exit 0; }
	@unformatted="$$($(dir $(GO))gofmt -l go examples/go crates/cotenant-lab/lab-probes/goworker)"; [ -z "$$unformatted" ] || { echo "gofmt needed: $$unformatted"; exit 1; }
	cd go && $(GOENV) $(GO) vet ./...
	cd go && $(GOENV) $(GO) test ./...
	cd go && $(GOENV) GOOS=darwin $(GO) build ./... && $(GOENV) GOOS=windows $(GO) build ./...

# Go modules with dependencies (tools/promcheck, deploy/check): fetched from the module proxy on
# a fresh machine, then checked against go.sum; never a newer toolchain than the machine's.
GOTOOLENV := GOFLAGS=-mod=readonly GOTOOLCHAIN=local

# The library's Prometheus exposition of 1 and of 3 pools through Prometheus's own text parser
# (tools/promcheck: one HELP/TYPE per family, cumulative buckets, _count = tasks run), and the
# prometheus-client and metrics features built, linted and tested.
metrics-check:
	$(CARGO) clippy --locked -p cotenant --all-targets --features prometheus-client,metrics -- -D warnings
	$(CARGO) test --locked -p cotenant --features prometheus-client,metrics --lib metrics::
	@[ -x "$(GO)" ] || { echo "metrics-check: parser SKIPPED: go not found"; exit 0; }; \
	case "$$($(GO) env GOVERSION)" in go1.1[0-9]*|go1.2[0-5]|go1.2[0-5].*) echo "metrics-check: parser SKIPPED: needs Go 1.26 or later"; exit 0;; esac; \
	(cd tools/promcheck && $(GOTOOLENV) $(GO) mod download) >/dev/null 2>&1 || { echo "metrics-check: parser SKIPPED: its Go modules cannot be fetched (no module proxy?)"; exit 0; }; \
	unformatted="$$($(dir $(GO))gofmt -l tools/promcheck)"; [ -z "$$unformatted" ] || { echo "gofmt needed: $$unformatted"; exit 1; }; \
	dir="$$(mktemp -d)" && trap 'rm -rf "$$dir"' EXIT && \
	for n in 1 3; do \
	  $(CARGO) run --locked -q -p cotenant --example exposition -- $$n > "$$dir/pools-$$n.txt" || exit 1; \
	  (cd tools/promcheck && $(GOTOOLENV) $(GO) run . -pools $$n "$$dir/pools-$$n.txt") || exit 1; \
	done; \
	cd tools/promcheck && $(GOTOOLENV) $(GO) vet ./... && $(GOTOOLENV) $(GO) test ./...

# The Dockerfile, Kubernetes manifests and Grafana dashboard, decoded and checked (deploy/check;
# k8s.io/api needs Go 1.26).
deploy-check:
	@[ -x "$(GO)" ] || { echo "deploy-check: SKIPPED: go not found"; exit 0; }; \
	case "$$($(GO) env GOVERSION)" in go1.1[0-9]*|go1.2[0-5]|go1.2[0-5].*) echo "deploy-check: SKIPPED: needs Go 1.26 or later"; exit 0;; esac; \
	(cd deploy/check && $(GOTOOLENV) $(GO) mod download) >/dev/null 2>&1 || { echo "deploy-check: SKIPPED: its Go modules cannot be fetched (no module proxy?)"; exit 0; }; \
	unformatted="$$($(dir $(GO))gofmt -l deploy/check)"; [ -z "$$unformatted" ] || { echo "gofmt needed: $$unformatted"; exit 1; }; \
	cd deploy/check && $(GOTOOLENV) $(GO) vet ./... && $(GOTOOLENV) $(GO) test ./...

# The C ABI: builds crates/cotenant-ffi, compiles examples/c against its header and runs it.
c-abi:
	sh crates/cotenant-ffi/test-c.sh

# Structure-aware property tests of the /proc and cgroup-fs parsers, 100,000 generated-then-
# damaged files per parser and as many through cpus::Probe, each test printing its count
# (crates/cotenant/tests/parsers_fuzz.rs; a few minutes, most of it the release build). Not part
# of `make test`, whose unit step runs the same tests with 2,000 cases each.
# `COTENANT_FUZZ_SEED=<n> make fuzz` tries other cases (the default seed is fixed).
fuzz:
	COTENANT_FUZZ_CASES=100000 $(CARGO) test --locked --release -p cotenant --test parsers_fuzz -- --nocapture

# Benchmarks: not part of `make test` (timings on a shared 2-CPU machine are not assertions).
bench:
	$(CARGO) bench -p cotenant --bench refresh

# The pool against its peers (ratios in one run) and the controller's CPU cost; see RESULTS.md.
bench-pool:
	$(CARGO) run --release --locked -p cotenant-bench -- --rounds 5
	$(CARGO) run --release --locked -p cotenant-bench -- --controller-cost 10

# The simulator against the committed real runs (docs/results/sim-validation-2cpu/: lab
# neighbours on a 2-CPU VM, P = 2 and 3, both settings, 70-150 % load), with each scheduler
# model (the Linux one with the rules traced on 6.18: docs/results/sim-validation-2cpu-exact-cpu/trace-s25/),
# and the Linux model with each process's submitting thread (10 µs per wake-up, as traced), with
# group shares by counts (the default) and from load averages:
# every ignorant/pool ratio, real against simulated (median of 5 seeds).
sim-validate:
	$(CARGO) build --release --locked -p cotenant-cli
	for real in docs/results/sim-validation-2cpu docs/results/sim-validation-2cpu-exact-cpu; do \
		for model in idealised linux; do \
			$(RELEASE_BIN) sim validate --real $$real/results.json --scheduler $$model || exit 1; \
		done; \
		$(RELEASE_BIN) sim validate --real $$real/results.json --scheduler linux --submit-us 10 || exit 1; \
		$(RELEASE_BIN) sim validate --real $$real/results.json --scheduler linux --submit-us 10 --group-shares loads || exit 1; \
	done

# The simulator tables of docs/policy.md.
policy-sim:
	$(CARGO) run --release --locked -p cotenant --example policy_sim

# Every lab experiment in full (about 40 minutes on 2 CPUs); results under lab-results/.
lab:
	$(CARGO) build --release --locked -p cotenant-cli -p cotenant-preload
	$(RELEASE_BIN) lab all --out lab-results

clean:
	-[ -x $(RELEASE_BIN) ] && $(RELEASE_BIN) lab clean
	$(CARGO) clean

# The examples (examples/README.md): the axum service answers its own requests and exits, the
# rayon program sized by cotenant::cpus::get, the Go service with the controller (skipped
# without Go). The C example runs in c-abi and, through pkg-config, in install-check.
examples:
	CARGO=$(CARGO) GO=$(GO) sh examples/run-examples.sh

# `cargo install` alone gives a working `run --preload` (inside a 0.5-CPU cgroup; root only).
cargo-install-check:
	CARGO=$(CARGO) sh scripts/cargo-install-check.sh

# The library as it builds off Linux, forced on Linux (`--cfg cotenant_force_fallback`): CPU
# count from available_parallelism, a fixed-target pool, host tokens refused clearly.
fallback:
	RUSTFLAGS="--cfg cotenant_force_fallback" $(CARGO) test --locked -p cotenant --target-dir target/fallback

# The declared minimum Rust version (rust-version in Cargo.toml) builds the library, the
# simulator and the command without the lab, if rustup can install that toolchain.
MSRV = $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
msrv:
	@rustup toolchain install $(MSRV) --profile minimal >/dev/null 2>&1 || { echo "msrv: SKIPPED: rustup cannot install Rust $(MSRV) here"; exit 0; }; \
	echo "msrv: Rust $(MSRV)"; \
	$(CARGO) +$(MSRV) check --locked -p cotenant -p cotenant-sim --target-dir target/msrv && \
	$(CARGO) +$(MSRV) check --locked -p cotenant-cli --no-default-features --features tui --target-dir target/msrv

# The unsafe code that stores a task's closure in the queue's slot (pool/job.rs), under Miri
# (undefined behaviour, leaks, double drops), if rustup can install a nightly with Miri here.
miri:
	@rustup toolchain install nightly --profile minimal -c miri -c rust-src >/dev/null 2>&1 \
		|| { echo "miri: SKIPPED: rustup cannot install a nightly toolchain with Miri here"; exit 0; }; \
	echo "miri: pool::job under Miri"; \
	$(CARGO) +nightly miri test --locked -p cotenant --lib --target-dir target/miri pool::job

# The publishable crates packaged and verified together, then cotenant, cotenant-sim and
# cotenant-cli one by one. None is on crates.io yet, so .cargo/config.toml points their names at
# this checkout: each verification build compiles its own crate from its package and the
# crates it depends on from this checkout (remove those patches once the crates are published,
# or a release would be verified against local sources).
# Without the patches, cargo unpacks the packages of its temporary registry into
# $CARGO_HOME/registry/src and reuses an unpacked copy whose name matches, so a verification
# could compile an older packaging of these crates (rust-lang/cargo keys the copy by the
# registry's path, not by the content): the copies of these five crates are removed first. No
# dependency of the workspace has these names.
# For the same reason the verification builds in a target folder of its own, emptied first: in
# the workspace's it found a library compiled from an older packaging of `cotenant` (cargo
# never re-checks a registry package's sources) and failed on a module added since.
CARGO_HOME_DIR = $(or $(CARGO_HOME),$(HOME)/.cargo)
package:
	rm -rf $(CARGO_HOME_DIR)/registry/src/*/cotenant-0.* $(CARGO_HOME_DIR)/registry/src/*/cotenant-sim-* \
		$(CARGO_HOME_DIR)/registry/src/*/cotenant-ops-* $(CARGO_HOME_DIR)/registry/src/*/cotenant-lab-* \
		$(CARGO_HOME_DIR)/registry/src/*/cotenant-cli-* target/package target/pkgverify
	$(CARGO) package --locked --allow-dirty -p cotenant -p cotenant-sim -p cotenant-ops -p cotenant-lab -p cotenant-cli \
		--target-dir target/pkgverify
	@# Each published crate alone too, as its own release would run it; until the crates are on
	@# crates.io, .cargo/config.toml points their names at this checkout.
	for crate in cotenant cotenant-sim cotenant-cli; do \
		$(CARGO) package --locked --allow-dirty -p $$crate --target-dir target/pkgverify || exit 1; \
	done

# `make install PREFIX=...`, `make uninstall`, `make install-check` (the C library, header, shim,
# pkg-config file and the command; mk/install.mk).
include mk/install.mk
