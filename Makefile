# One command sets up and runs each job on a fresh machine (Python >= 3.10 with venv).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench setup clean

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[test,torch,plot]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/nkisim demo

test: $(STAMP)
	$(BIN)/python -m pytest tests
	NKISIM_FAST_PATHS=0 $(BIN)/python -m pytest -q -p no:warnings tests

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV)
