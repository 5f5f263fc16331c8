"""What keeps a coachee safe: the crisis pre-gate (patterns and a model-free classifier) and
the quality gate every coachee-visible text passes."""
