.DEFAULT_GOAL := help
.PHONY: help run test test-fast lint trial

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

run: ## Install everything and run the app (web, worker, embedded model); prints where to log in
	@scripts/run.sh

test: ## Install everything and run all checks and tests (what CI runs)
	@scripts/test.sh

test-fast: ## All checks and tests except the real-model and browser ones
	@scripts/test.sh -m "not slow and not browser"

lint: ## ruff, mypy and the import contracts only
	.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy . && .venv/bin/lint-imports --no-cache

bench: ## Performance benchmark: the real stack at 1-50 coachees on the simulator, one real-model turn (minutes)
	@scripts/bench.sh $(BENCH_ARGS)

trial: ## Engine trial on vLLM: make run's start timed, 10 turns in Chromium, 20 risky turns (~30 min, idle machine)
	@.venv/bin/python -m benchmarks.engine_trial $(TRIAL_ARGS)
