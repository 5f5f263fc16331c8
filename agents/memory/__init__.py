"""What the coach remembers and what every agent sees: the context builder, token counts,
the blackboard, predictions, summaries."""
