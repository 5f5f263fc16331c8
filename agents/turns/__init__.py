"""A turn's and a session's lifecycle: accept, finish, the event log, limits, and queuing
the background work by task name (never importing the tasks module)."""
