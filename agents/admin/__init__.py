"""Django admin, split by who uses it: coaches review (coach.py), operators configure (operator.py)."""

from agents.admin import coach, operator

__all__ = ["coach", "operator"]
