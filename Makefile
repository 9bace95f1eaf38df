# ultimate_jobs: the developer entry points.
#
#   make demo          venv + the example project on SQLite: migrate, enqueue, run the worker, print
#   make test          venv + the whole suite (PostgreSQL when reachable, else SQLite with a notice)
#   make test-sqlite   the suite on SQLite only
#   make lint          ruff, the import layers (lint-imports), mypy, and a check that no migration is missing
#   make bench         the benchmarks in bench/ (make mutation, make chaos, make soak: see the end of this file)
#   make clean         remove the venvs, caches and the demo database
#
# Variables: PYTHON (python3) creates the venv; VENV (.venv) is where it lives; EXTRA_PIP is
# installed beside '.[dev]' (e.g. EXTRA_PIP='Django>=6.0,<7'); PYTEST_ARGS go to pytest.
# Example: make test VENV=.venv312 PYTHON=python3.12 EXTRA_PIP='Django>=6.0,<7' PYTEST_ARGS='-x -q'

PYTHON ?= python3
VENV ?= .venv
EXTRA_PIP ?=
PYTEST_ARGS ?=

PY := $(VENV)/bin/python
comma := ,
STAMP := $(VENV)/.installed
# Each EXTRA_PIP word is quoted, so specifiers such as Django>=6.0,<7 reach pip intact.
EXTRA_PIP_ARGS := $(foreach spec,$(EXTRA_PIP),'$(spec)')

.DEFAULT_GOAL := help
.PHONY: help venv demo test test-sqlite bench lint clean FORCE

help:
	@sed -n '3,9p' Makefile | sed 's/^# *//'

venv: $(STAMP)

# Reinstall only when pyproject.toml or EXTRA_PIP changed since the last install.
$(STAMP): pyproject.toml $(VENV)/.extra-pip
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[dev]' $(EXTRA_PIP_ARGS)
	touch $@

# Rewritten only when EXTRA_PIP differs from the last run's, so the stamp above stays fresh.
$(VENV)/.extra-pip: FORCE
	@mkdir -p $(VENV)
	@printf '%s\n' "$(EXTRA_PIP)" | cmp -s - $@ || printf '%s\n' "$(EXTRA_PIP)" > $@

FORCE:

demo: venv
	$(PY) manage.py demo

test: venv
	$(PY) -m pytest tests $(PYTEST_ARGS) || { rc=$$?; [ $$rc -ne 5 ] || echo "pytest ran no tests (exit 5)" >&2; exit $$rc; }

test-sqlite: venv
	JOBS_TEST_DB=sqlite $(PY) -m pytest tests $(PYTEST_ARGS) || { rc=$$?; [ $$rc -ne 5 ] || echo "pytest ran no tests (exit 5)" >&2; exit $$rc; }

# make bench: the peer comparison (the harness in $(BENCH_PEER_DIR), each peer in its own venv under
# $(BENCH_VENV_ROOT), made on first use) interleaved with our own cases, BENCH_ROUNDS rounds, then
# bench/RESULTS.md and docs/scaling-workers.png from that one run. About 40 min for 3 rounds on 2 cores.
BENCH_ROUNDS ?= 3
BENCH_PEER_DIR ?= ../shared/peer-bench
BENCH_VENV_ROOT ?= /tmp/pb
# celery_redis and celery_rabbitmq (Celery 5 over Redis at 127.0.0.1:6379 and RabbitMQ at 127.0.0.1:5672,
# both running before the bench) share one venv, perf-venv-celery (setup_venvs.sh celery).
BENCH_PEERS ?= pgqueuer procrastinate chancy oban celery_redis celery_rabbitmq
BENCH_STAMP := $(shell date +%Y%m%d-%H%M%S)
BENCH_OURS := bench/results/ours-$(BENCH_STAMP).jsonl
BENCH_PEER_OUT := bench/results/peers-$(BENCH_STAMP).jsonl

bench: venv
	$(PY) -m pip install -q -e '.[bench]'
	@for tool in $(BENCH_PEERS); do venv=$$tool; case $$tool in celery_*) venv=celery;; esac; \
	  test -d $(BENCH_VENV_ROOT)/perf-venv-$$venv || \
	  BENCH_VENV_ROOT=$(BENCH_VENV_ROOT) $(abspath $(BENCH_PEER_DIR))/setup_venvs.sh $$venv; done
	test -d $(BENCH_VENV_ROOT)/perf-venv-ultimate_jobs || \
	  BENCH_VENV_ROOT=$(BENCH_VENV_ROOT) $(abspath $(BENCH_PEER_DIR))/setup_venvs.sh ultimate_jobs $(CURDIR)
	BENCH_VENV_ROOT=$(BENCH_VENV_ROOT) $(PY) bench/run.py --rounds $(BENCH_ROUNDS) --peers \
	  --peer-dir $(abspath $(BENCH_PEER_DIR)) --peer-tools $(subst $(eval) ,$(comma),$(strip $(BENCH_PEERS) ultimate_jobs)) \
	  --metrics single,bulk,drain,latency,relay,flat,scale --out $(BENCH_OURS) --peer-out $(BENCH_PEER_OUT)
	$(PY) bench/results_md.py --ours $(BENCH_OURS) --peers $(BENCH_PEER_OUT) \
	  --command "make bench BENCH_ROUNDS=$(BENCH_ROUNDS) BENCH_PEERS='$(BENCH_PEERS)'"

lint: venv
	$(PY) -m ruff check --extend-exclude '.venv*' .
	$(VENV)/bin/lint-imports
	$(PY) -m mypy
	$(PY) -m django makemigrations --check --dry-run --settings tests.settings

clean:
	rm -rf $(VENV) .venv .venv312 .tox build dist *.egg-info .pytest_cache .ruff_cache
	rm -f example_project/db.sqlite3 example_project/db.sqlite3-*
	find . -path ./.git -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

# make chaos   the chaos tests (tests/chaos): PostgreSQL restarted under load; NOT part of `make test`.
#              They restart the local cluster with pg_ctlcluster, cutting every session on it.
# make soak    scripts/soak.py: 4 workers, 20,000 jobs, a killer; SOAK_ARGS (e.g. --minutes 10) go to it.
SOAK_ARGS ?=
.PHONY: chaos soak

chaos: venv
	JOBS_CHAOS=1 $(PY) -m pytest tests/chaos -p no:randomly $(PYTEST_ARGS)

soak: venv
	$(PY) scripts/soak.py $(SOAK_ARGS)

# make mutation  mutmut over redact, retry, cron, enqueue and the doctor ([tool.mutmut] in pyproject.toml:
#                the modules and the test files), each mutant run against only the tests that call the
#                mutated function; NOT part of `make test`. It works on a copy of the tree (build/mutation,
#                so the checkout is never mutated), in one process, on SQLite unless JOBS_TEST_DB is set,
#                then prints the score per module. MUTANTS narrows it: make mutation MUTANTS='ultimate_jobs.retry*'
MUTANTS ?=
MUTATION_DIR := build/mutation
.PHONY: mutation

mutation: venv
	$(PY) -m pip show mutmut >/dev/null 2>&1 || $(PY) -m pip install 'mutmut>=3.3,<4'
	mkdir -p $(MUTATION_DIR)
	rsync -a --delete --exclude .git --exclude '.venv*' --exclude /build --exclude /mutants --exclude '*.egg-info' \
		./ $(MUTATION_DIR)/
	cd $(MUTATION_DIR) && JOBS_TEST_DB=$${JOBS_TEST_DB:-sqlite} $(abspath $(VENV))/bin/mutmut run --max-children 1 $(MUTANTS)
	$(PY) scripts/mutation_score.py $(MUTATION_DIR)
