"""The one accessor for the ``ULTIMATE_JOBS`` settings dict.

Usage::

    # settings.py
    ULTIMATE_JOBS = {"VISIBILITY_TIMEOUT": "60s", "OUTBOX": "required"}

    from ultimate_jobs.conf import get_settings
    get_settings().VISIBILITY_TIMEOUT        # -> 60.0 (seconds)

Options (default): ``DATABASE`` ("default"), ``OUTBOX`` ("auto"), ``QUEUES`` (["default"]),
``CONCURRENCY`` (10), ``MAX_IN_FLIGHT`` (None), ``POLL_INTERVAL`` (250ms), ``IDLE_POLL_MAX`` (2s),
``WAKE_WINDOW`` (10ms: at most one wake per queue per window per process; a withheld one is sent when it ends),
``VISIBILITY_TIMEOUT`` (30s), ``HEARTBEAT_INTERVAL`` (a third of the visibility timeout),
``DRAIN_TIMEOUT`` (25s), ``LIMITS`` ({}), ``RELAY_BATCH_SIZE`` (500), ``CLAIM_LEASE`` (30s),
``OUTBOX_RETENTION`` (1d), ``DONE_RETENTION`` (14d), ``DEAD_RETENTION`` (90d), ``ENVIRONMENT``
(None), ``TENANT_OF`` (None), ``TENANT_CONTEXT`` (None), ``ADMIN_TENANT_OF`` (None),
``EVENT_POLL`` (15 min with the wake, 30 s without), ``MAX_PAYLOAD_BYTES`` (1 MiB), ``MAX_STEP_OUTPUT_BYTES`` (1 MiB),
``MAX_RESULT_BYTES`` (1 MiB), ``REDACT_KEYS`` (password, passwd, pwd, secret, token, api_key, apikey,
private_key, authorization, cookie, session, signature, credential, dsn), ``REDACT_KEYS_EXTRA`` (():
added to ``REDACT_KEYS``), ``METRICS_TOKEN`` (None: the metrics view needs a user with
``ultimate_jobs.view_job``; set, at least 24 characters, a scraper may send
``Authorization: Bearer <token>``),
``WEBHOOK_ALLOW_HTTP`` (False: ``webhook()`` refuses plain ``http://`` endpoints unless declared
``allow_private=True``; True allows them, for a development receiver), ``QUEUE_DATABASES`` ({}: queue
name -> database alias holding that queue's jobs, ``db.routing``), ``LISTEN_DATABASES`` ({}: jobs alias
-> the alias its LISTEN connection uses, one reaching the same database directly or through a
session-mode pool), ``WAKE_PROBE_INTERVAL`` (60s: how often a listener proves its LISTEN hears).
Durations are held in seconds.

Settings are read on first use, never at import, and validated whole: a bad value raises
``X_CONFIG_INVALID`` naming the key, and the system check ``ultimate_jobs.E001`` reports it from
``manage.py check``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from ultimate_jobs.durations import to_seconds
from ultimate_jobs.errors import X_CONFIG_INVALID, JobsError
from ultimate_jobs.names import QUEUE_PATTERN, check_queue_name

DEFAULT_REDACT_KEYS = (
    "password", "passwd", "pwd", "secret", "token", "api_key", "apikey", "private_key",
    "authorization", "cookie", "session", "signature", "credential", "dsn",
)
DEFAULT_VISIBILITY = 30.0
MIN_METRICS_TOKEN = 24  # characters; secrets.token_urlsafe(32) gives 43
_LIMIT_KEYS = {"per_tenant", "per_queue", "global", "rate_per_tenant"}


@dataclass(frozen=True, slots=True, kw_only=True)
class JobsSettings:
    DATABASE: str = "default"
    OUTBOX: str = "auto"
    QUEUES: tuple[str, ...] = ("default",)
    CONCURRENCY: int | dict[str, int] = 10
    MAX_IN_FLIGHT: int | None = None
    POLL_INTERVAL: float = 0.25
    IDLE_POLL_MAX: float = 2.0
    WAKE_WINDOW: float = 0.01
    VISIBILITY_TIMEOUT: float = DEFAULT_VISIBILITY
    HEARTBEAT_INTERVAL: float = 10.0
    DRAIN_TIMEOUT: float = 25.0
    LIMITS: Mapping[str, Any] = field(default_factory=dict)
    RELAY_BATCH_SIZE: int = 500
    CLAIM_LEASE: float = 30.0
    OUTBOX_RETENTION: float = 86400.0
    DONE_RETENTION: float = 14 * 86400.0
    DEAD_RETENTION: float = 90 * 86400.0
    ENVIRONMENT: str | None = None
    TENANT_OF: str | None = None
    TENANT_CONTEXT: str | None = None
    ADMIN_TENANT_OF: str | None = None
    EVENT_POLL: float | None = None
    MAX_PAYLOAD_BYTES: int = 1 << 20
    MAX_STEP_OUTPUT_BYTES: int = 1 << 20
    MAX_RESULT_BYTES: int = 1 << 20
    REDACT_KEYS: tuple[str, ...] = DEFAULT_REDACT_KEYS
    REDACT_KEYS_EXTRA: tuple[str, ...] = ()
    METRICS_TOKEN: str | None = None
    WEBHOOK_ALLOW_HTTP: bool = False
    QUEUE_DATABASES: Mapping[str, str] = field(default_factory=dict)
    LISTEN_DATABASES: Mapping[str, str] = field(default_factory=dict)
    WAKE_PROBE_INTERVAL: float = 60.0

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> JobsSettings:
        """Validate ``raw`` whole; raise ``X_CONFIG_INVALID`` naming the first bad key."""
        if not isinstance(raw, Mapping):
            raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS must be a dict, not {type(raw).__name__}.")
        unknown = sorted(set(raw) - set(cls.__dataclass_fields__))
        if unknown:
            raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS has unknown key(s) {', '.join(unknown)}.",
                            f"Remove them; the keys are {', '.join(cls.__dataclass_fields__)}.")
        values: dict[str, Any] = {}
        for key in ("POLL_INTERVAL", "IDLE_POLL_MAX", "VISIBILITY_TIMEOUT", "DRAIN_TIMEOUT", "CLAIM_LEASE",
                    "OUTBOX_RETENTION", "DONE_RETENTION", "DEAD_RETENTION", "HEARTBEAT_INTERVAL", "EVENT_POLL",
                    "WAKE_WINDOW", "WAKE_PROBE_INTERVAL"):
            if key in raw and raw[key] is not None:
                values[key] = to_seconds(raw[key], subject=f"ULTIMATE_JOBS[{key!r}]")
        if "HEARTBEAT_INTERVAL" not in values:
            values["HEARTBEAT_INTERVAL"] = values.get("VISIBILITY_TIMEOUT", DEFAULT_VISIBILITY) / 3
        if values["HEARTBEAT_INTERVAL"] >= values.get("VISIBILITY_TIMEOUT", DEFAULT_VISIBILITY):
            raise JobsError(X_CONFIG_INVALID, "ULTIMATE_JOBS['HEARTBEAT_INTERVAL'] must be shorter than "
                            "VISIBILITY_TIMEOUT, or every lease lapses between renewals.",
                            "Leave HEARTBEAT_INTERVAL unset (a third of VISIBILITY_TIMEOUT).")
        for key in ("DATABASE",):
            if key in raw:
                values[key] = _text(key, raw[key])
        for key in ("ENVIRONMENT", "TENANT_OF", "TENANT_CONTEXT", "ADMIN_TENANT_OF", "METRICS_TOKEN"):
            if raw.get(key) is not None:
                values[key] = _text(key, raw[key])
        if len(values.get("METRICS_TOKEN") or "x" * MIN_METRICS_TOKEN) < MIN_METRICS_TOKEN:
            # A bearer token is the whole credential: a short one is guessed in a few requests.
            raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS['METRICS_TOKEN'] is {len(values['METRICS_TOKEN'])} "
                            f"character(s); it needs at least {MIN_METRICS_TOKEN}.",
                            "Generate one: python -c 'import secrets; print(secrets.token_urlsafe(32))'.")
        if "WEBHOOK_ALLOW_HTTP" in raw:
            if not isinstance(raw["WEBHOOK_ALLOW_HTTP"], bool):
                raise JobsError(X_CONFIG_INVALID, "ULTIMATE_JOBS['WEBHOOK_ALLOW_HTTP'] must be True or False.")
            values["WEBHOOK_ALLOW_HTTP"] = raw["WEBHOOK_ALLOW_HTTP"]
        if "OUTBOX" in raw:
            if raw["OUTBOX"] not in ("auto", "required"):
                raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS['OUTBOX']={raw['OUTBOX']!r} is not "
                                '"auto" or "required".', 'Set OUTBOX to "auto" or "required".')
            values["OUTBOX"] = raw["OUTBOX"]
        if "QUEUES" in raw:
            queues = raw["QUEUES"]
            if isinstance(queues, str) or not isinstance(queues, list | tuple) or not queues:
                raise JobsError(X_CONFIG_INVALID, "ULTIMATE_JOBS['QUEUES'] must be a non-empty list of names.")
            values["QUEUES"] = tuple(check_queue_name(q, code=X_CONFIG_INVALID) for q in queues)
        if "CONCURRENCY" in raw:
            conc = raw["CONCURRENCY"]
            if isinstance(conc, Mapping):
                values["CONCURRENCY"] = {str(q): _count(f"CONCURRENCY[{q!r}]", n, minimum=1) for q, n in conc.items()}
            else:
                values["CONCURRENCY"] = _count("CONCURRENCY", conc, minimum=1)
        if raw.get("MAX_IN_FLIGHT") is not None:
            values["MAX_IN_FLIGHT"] = _count("MAX_IN_FLIGHT", raw["MAX_IN_FLIGHT"], minimum=1)
        for key in ("RELAY_BATCH_SIZE", "MAX_PAYLOAD_BYTES", "MAX_STEP_OUTPUT_BYTES", "MAX_RESULT_BYTES"):
            if key in raw:
                values[key] = _count(key, raw[key], minimum=1)
        if "LIMITS" in raw:
            values["LIMITS"] = _limits(raw["LIMITS"])
        if raw.get("QUEUE_DATABASES") is not None:
            values["QUEUE_DATABASES"] = _routes(raw["QUEUE_DATABASES"])
        if raw.get("LISTEN_DATABASES") is not None:
            values["LISTEN_DATABASES"] = _listen_aliases(raw["LISTEN_DATABASES"])
        if values.get("WAKE_PROBE_INTERVAL", 60.0) < 1.0:
            raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS['WAKE_PROBE_INTERVAL']={raw['WAKE_PROBE_INTERVAL']!r} "
                            "is under 1s: a probe waits up to 1s for its own notification.",
                            'Leave it unset (60s), or give a duration of at least "1s".')
        for key in ("REDACT_KEYS", "REDACT_KEYS_EXTRA"):
            if key in raw:
                keys = raw[key]
                if (isinstance(keys, str) or not isinstance(keys, list | tuple)
                        or not all(isinstance(k, str) and k.strip() for k in keys)):
                    raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS[{key!r}] must be a list of key names.")
                # "-" and "_" alike: X-Api-Key is api_key (ultimate_jobs.redact).
                values[key] = tuple(k.strip().lower().replace("-", "_") for k in keys)
        return cls(**values)


def _text(key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS[{key!r}]={value!r} must be a non-empty string.")
    return value


def _count(key: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS[{key!r}]={value!r} must be a whole number >= {minimum}.")
    return value


def _routes(raw: object) -> dict[str, str]:
    """``QUEUE_DATABASES``'s shape: queue name -> alias. Whether each alias exists and is PostgreSQL
    is the system check's (``db.routing.check_routes``): settings are read before connections."""
    if not isinstance(raw, Mapping):
        raise JobsError(X_CONFIG_INVALID, "ULTIMATE_JOBS['QUEUE_DATABASES'] must be a dict of queue name -> "
                        "database alias.", 'Write it as {"emails": "jobs_emails"}.')
    routes: dict[str, str] = {}
    for queue, alias in raw.items():
        if not isinstance(queue, str) or not QUEUE_PATTERN.match(queue):
            raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS['QUEUE_DATABASES'] routes {queue!r}, which is not a "
                            "valid queue name.", "Use a queue name matching ^[a-z0-9][a-z0-9_.:-]{0,63}$.")
        if not isinstance(alias, str) or not alias:
            raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS['QUEUE_DATABASES'][{queue!r}]={alias!r} must be a "
                            "database alias (a non-empty string).", f'Write it as {{"{queue}": "jobs_{queue}"}}.')
        routes[queue] = alias
    return routes


def _listen_aliases(raw: object) -> dict[str, str]:
    """``LISTEN_DATABASES``'s shape: jobs alias -> alias. Whether each exists is the system check's
    (``db.routing.check_listen_databases``)."""
    if not isinstance(raw, Mapping):
        raise JobsError(X_CONFIG_INVALID, "ULTIMATE_JOBS['LISTEN_DATABASES'] must be a dict of jobs alias -> the "
                        "alias its LISTEN uses.", 'Write it as {"default": "default_direct"}.')
    for jobs_alias, listen_alias in raw.items():
        if not isinstance(jobs_alias, str) or not jobs_alias or not isinstance(listen_alias, str) or not listen_alias:
            raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS['LISTEN_DATABASES'] maps {jobs_alias!r} to "
                            f"{listen_alias!r}; both must be database aliases (non-empty strings).",
                            'Write it as {"default": "default_direct"}.')
    return dict(raw)


def _limits(raw: object) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise JobsError(X_CONFIG_INVALID, "ULTIMATE_JOBS['LIMITS'] must be a dict.")
    unknown = sorted(set(raw) - _LIMIT_KEYS)
    if unknown:
        raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS['LIMITS'] has unknown key(s) {', '.join(unknown)}.",
                        f"Use only {', '.join(sorted(_LIMIT_KEYS))}.")
    limits: dict[str, Any] = {}
    for key in ("per_tenant", "per_queue", "global"):
        if raw.get(key) is not None:
            limits[key] = _count(f"LIMITS.{key}", raw[key], minimum=0)
    rate = raw.get("rate_per_tenant")
    if rate is not None:
        if not isinstance(rate, Mapping) or set(rate) != {"limit", "window"}:
            raise JobsError(X_CONFIG_INVALID, "ULTIMATE_JOBS['LIMITS']['rate_per_tenant'] must be "
                            '{"limit": N, "window": "1s"}.')
        window = to_seconds(rate["window"], subject="LIMITS.rate_per_tenant.window")
        if not math.isfinite(window):
            raise JobsError(X_CONFIG_INVALID, "LIMITS.rate_per_tenant.window must be finite.")
        limits["rate_per_tenant"] = {"limit": _count("LIMITS.rate_per_tenant.limit", rate["limit"], minimum=0),
                                     "window": window}
    return limits


@functools.cache
def get_settings() -> JobsSettings:
    """The validated ``ULTIMATE_JOBS`` settings; raise ``X_CONFIG_INVALID`` naming a bad key."""
    return JobsSettings.from_dict(getattr(django_settings, "ULTIMATE_JOBS", {}) or {})


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: object) -> None:
    if setting == "ULTIMATE_JOBS":
        get_settings.cache_clear()
