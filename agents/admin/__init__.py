"""Django admin, split by who uses it: coaches review (coach.py, coach_records.py), operators
configure (operator.py, prompt_versions.py, with their forms in forms.py)."""

from agents.admin import coach, coach_records, operator, prompt_versions

__all__ = ["coach", "coach_records", "operator", "prompt_versions"]
