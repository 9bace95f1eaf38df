"""Integrations with other frameworks, each imported only where it is used (``contrib.tasks``:
the backend for Django's Tasks framework)."""
