"""What operators do to configuration: prompt versions and their diffs, replays of a draft on
stored runs, evaluation sets, and model endpoint connection tests; every change audited."""
