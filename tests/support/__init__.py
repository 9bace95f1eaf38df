"""What tests in more than one place share: the modules real worker processes import by path
(``JOBS_TEST_MODULES``: ``consumer_jobs``, ``webhook_jobs``; Django tasks: ``django_tasks``), the
local HTTP receiver and the ``QUEUE_DATABASES`` fixtures (pytest plugins, named in
tests/conftest.py), the subject over the test app's customers, and a second PostgreSQL session."""
