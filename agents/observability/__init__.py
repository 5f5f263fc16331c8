"""What operators watch: Prometheus metrics (metrics.py, collectors.py, the scrape view in
views.py), OpenTelemetry traces in the GenAI conventions (tracing.py) and the last hour per
agent from AgentRun rows (stats.py, for the admin page).

Call sites elsewhere are one line each (`metrics.agent_run_recorded(run)`), and every recorder
returns at once when COACHING_METRICS is off. No label ever carries a user, session, turn or
message id, nor any text: only agent names, endpoint names and fixed outcome or check names.
"""
