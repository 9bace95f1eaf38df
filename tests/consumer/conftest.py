"""The process tests' worker fixture, for the consumer's own process tests."""

from tests.process.conftest import started_worker  # noqa: F401  (the fixture)
