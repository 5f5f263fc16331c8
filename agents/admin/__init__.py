"""Django admin, split by who uses it: coaches review (coach.py), operators configure (operator.py,
prompt_versions.py, with their forms in forms.py)."""

from agents.admin import coach, operator, prompt_versions

__all__ = ["coach", "operator", "prompt_versions"]
