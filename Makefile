# cudal1 front door. `make demo` and `make test` work on a fresh Debian 12 machine (as root they
# install missing packages; otherwise they print the apt-get line needed).
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
DEMO_TASK ?= examples/l1_gelu_tanh/task.py
DEMO_CANDIDATE ?= examples/l1_gelu_tanh/fast_torch.py
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")

.PHONY: all build configure setup demo test test-gpu format clean

all: build

# Prints the PyTorch interpreter on its last line; CMake embeds that one in the worker.
$(BUILD_DIR)/.python: scripts/setup.sh
	@mkdir -p $(BUILD_DIR)
	@scripts/setup.sh > $(BUILD_DIR)/.python.tmp && mv $(BUILD_DIR)/.python.tmp $(BUILD_DIR)/.python

setup:
	@rm -f $(BUILD_DIR)/.python
	@$(MAKE) --no-print-directory $(BUILD_DIR)/.python

configure: $(BUILD_DIR)/.python
	@cmake -S . -B $(BUILD_DIR) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DPython3_EXECUTABLE=$$(cat $(BUILD_DIR)/.python) > $(BUILD_DIR)/cmake-configure.log \
	  || { cat $(BUILD_DIR)/cmake-configure.log; exit 1; }

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# A first run shows a verdict soon: only the cudal1 binary and its worker are built (about two
# thirds of the build); `make test` builds the rest.
demo: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target cudal1_cli
	$(BUILD_DIR)/cudal1 eval --task $(DEMO_TASK) --candidate $(DEMO_CANDIDATE) --time-budget 10

test: build
	cd $(BUILD_DIR) && ctest -LE gpu --output-on-failure -j 2 --timeout 1800

test-gpu: build
	cd $(BUILD_DIR) && ctest -L gpu --output-on-failure --timeout 1800

format:
	clang-format -i $$(git ls-files 'src/*.cpp' 'src/*.hpp' 'tests/*.cpp' 'tests/*.hpp')

clean:
	rm -rf $(BUILD_DIR)
