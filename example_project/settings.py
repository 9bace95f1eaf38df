"""Settings for the example project (``python manage.py ...`` from the repository root).

``DATABASE_URL`` picks the database (django-environ syntax); the default is SQLite in
``example_project/db.sqlite3``. For PostgreSQL::

    createdb -h 127.0.0.1 -U postgres uj_demo
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/uj_demo make demo

Without django-environ (a plain ``pip install ultimate-jobs``, as scripts/plain_install_check.sh
runs it) the settings are the defaults below, on SQLite; ``DATABASE_URL`` then needs django-environ.
"""

from __future__ import annotations

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SQLITE_URL = f"sqlite:///{BASE_DIR / 'example_project' / 'db.sqlite3'}"

try:
    import environ
except ImportError:  # not a dependency of ultimate-jobs: the defaults, on SQLite
    if os.environ.get("DATABASE_URL"):
        raise RuntimeError("DATABASE_URL needs django-environ: pip install django-environ") from None
    SECRET_KEY = os.environ.get("SECRET_KEY", "example-project-insecure-key-do-not-deploy")
    DEBUG = True
    ALLOWED_HOSTS = ["localhost", "127.0.0.1"]
    database = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(BASE_DIR / "example_project" / "db.sqlite3")}
else:
    env = environ.Env(DEBUG=(bool, True))
    SECRET_KEY = env("SECRET_KEY", default="example-project-insecure-key-do-not-deploy")
    DEBUG = env("DEBUG")
    ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1"])
    database = env.db_url("DATABASE_URL", default=SQLITE_URL)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "ultimate_jobs",
    "example_project.shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"

TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]

DATABASES = {"default": database}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The worker and the web process write to one file: wait for the lock instead of failing
    # at once, and take the write lock when a transaction begins (Django >= 5.1), so two
    # writers never deadlock upgrading a read lock.
    DATABASES["default"].setdefault("OPTIONS", {}).update({"timeout": 30, "transaction_mode": "IMMEDIATE"})

USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The one settings dict ultimate_jobs reads; every key is optional (docs/reference/settings.md).
ULTIMATE_JOBS = {
    "QUEUES": ["default", "emails"],
    "CONCURRENCY": 4,
}
