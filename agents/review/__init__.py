"""What coaches see in Django admin: read models of sessions, turns, agents' outputs, the review
queue and coachees, their charts and CSV exports, and the annotations coaches write."""
