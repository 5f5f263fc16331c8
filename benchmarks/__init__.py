"""The performance benchmark: the real stack (Daphne, a Celery worker, PostgreSQL, Redis) driven
by real WebSocket clients against the simulated model server. Run it with `make bench` or
`python -m benchmarks.run --help`; docs/bench/README.md explains every figure."""
