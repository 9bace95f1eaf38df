"""Settings for ``bench/webhooks.py``: ``bench.settings`` plus the app that declares the delivery."""

from bench.settings import *  # noqa: F403
from bench.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench.webhooks_app"]
