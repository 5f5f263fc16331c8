"""What each agent is: its output schema, the arbitration rules over the outputs, and the
setup (prompt version, model, budgets) loaded once per turn."""
