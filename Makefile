# torchwise developer tasks. Every target sets up .venv first when it is missing
# or older than pyproject.toml.
#
#   make demo    review, inspect, document and health-check the bundled example project,
#                then scan and inspect a checkpoint of its model
#   make test    ruff, mypy and the whole pytest suite
#   make bench   compare against the peer tools (installs the `bench` extra)
#   make clean   remove .venv, caches and build outputs

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
EXAMPLE := examples/cifar_project
DEMO_OUT := build/demo

# The CPU wheel of torch 2.13.0 is installed first and pinned: any other torch
# spec would pull gigabytes of CUDA packages. The package's `torch` extra accepts
# torch>=2.4; the base install needs no torch at all.
TORCH_PIN := torch==2.13.0

.PHONY: setup demo test lint typecheck unit bench clean docs

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH_PIN)
	$(BIN)/python -m pip install --quiet -e '.[dev,torch]' $(TORCH_PIN)
	touch $(STAMP)

demo: $(STAMP)
	@echo "\n== 1. torchwise review $(EXAMPLE): the bugs in the code =="
	$(BIN)/torchwise review $(EXAMPLE) --no-cache --exit-zero
	@echo "\n== 2. torchwise inspect cifarnet: shapes, parameters, FLOPs, memory =="
	$(BIN)/torchwise inspect cifarnet --config $(EXAMPLE) --depth 1
	@echo "\n== 3. torchwise doc cifarnet --diff: the docstrings it would write =="
	@# --diff exits 1 when it would change a file (as review --diff); only 2 is an error here
	$(BIN)/torchwise doc cifarnet --config $(EXAMPLE) --diff || test $$? -eq 1
	@echo "\n== 4. torchwise doctor CifarNet: health checks by running it =="
	$(BIN)/torchwise doctor $(EXAMPLE)/model.py:CifarNet --input 'f32[8,3,32,32]'
	@echo "\n== 5. torchwise ckpt: a training checkpoint, read and vetted without unpickling =="
	@mkdir -p $(DEMO_OUT)
	$(BIN)/python -c "import sys, torch; sys.path.insert(0, '$(EXAMPLE)'); from model import CifarNet; \
	  m = CifarNet(); o = torch.optim.AdamW(m.parameters()); m(torch.randn(2, 3, 32, 32)).sum().backward(); o.step(); \
	  torch.save({'model': m.state_dict(), 'optimizer': o.state_dict(), 'epoch': 0}, '$(DEMO_OUT)/cifarnet.pt')"
	$(BIN)/torchwise ckpt scan $(DEMO_OUT)/cifarnet.pt
	$(BIN)/torchwise ckpt inspect $(DEMO_OUT)/cifarnet.pt

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q

test: lint typecheck unit

docs: $(STAMP)
	$(BIN)/python scripts/gen_rule_docs.py

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,torch,bench]' $(TORCH_PIN)
	$(BIN)/python bench/review_speed.py
	$(BIN)/python bench/inspect_compare.py
	$(BIN)/python bench/doc_speed.py
	$(BIN)/python bench/doctor_catalogue.py
	$(BIN)/python bench/ckpt_scan.py
	$(BIN)/python bench/install_footprint.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache .torchwise_cache \
	       src/*.egg-info .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
