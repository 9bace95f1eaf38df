"""Every error ultimate_jobs raises, and the one registry of their codes.

Usage::

    from ultimate_jobs import JobsError
    try:
        send_receipt.enqueue(order_id=42)
    except JobsError as err:
        log.warning("%s", err)          # "[X_...] <cause> Fix: <fix>"

Every code is registered here exactly once with its default one-line fix, so an error can
never be raised with a code nobody documented (``docs/reference/errors.md`` lists them all).
Subclasses exist only where a caller needs ``except``: ``JobCancelled``, ``Terminal``,
``RetryAfter``. Suspension of a durable run is control flow, not an error, and derives from
``BaseException`` (see ``ultimate_jobs.runtime.steps``).
"""

from __future__ import annotations

from typing import Any

CODES: dict[str, str] = {}


def register(code: str, fix: str) -> str:
    """Declare ``code`` with its default fix; a second declaration is a programming error."""
    if code in CODES:
        raise ValueError(f"duplicate error code {code}")
    CODES[code] = fix
    return code


X_CONFIG_INVALID = register(
    "X_CONFIG_INVALID", "Correct the named ULTIMATE_JOBS setting; `manage.py check` validates them all."
)
X_INVARIANT = register("X_INVARIANT", "This is a bug in the caller or in ultimate_jobs; report it with the cause.")
X_ID_INVALID = register("X_ID_INVALID", "Pass a lowercase UUID string or a uuid.UUID.")
X_ID_AMBIGUOUS = register("X_ID_AMBIGUOUS", "Type more characters of the id (the cause lists the jobs it matches).")
X_IDEMPOTENCY_REQUIRED = register(
    "X_IDEMPOTENCY_REQUIRED",
    'Give @job an idempotency_key: a format string over the input such as "invoice:{invoice_id}", '
    "or a callable(**input) -> str.",
)
X_JOB_TENANT_REQUIRED = register(
    "X_JOB_TENANT_REQUIRED",
    "Give @job a tenant: a callable(**input) -> str, a format string, or NO_TENANT for global jobs.",
)
X_JOB_DUPLICATE = register(
    "X_JOB_DUPLICATE", "Give each job its own name=, or retry once the live job holding the key has finished."
)
X_JOB_DECLARATION_INVALID = register(
    "X_JOB_DECLARATION_INVALID", "Correct the named @job option; the docs list each option's accepted values."
)
X_JOB_INPUT_INVALID = register(
    "X_JOB_INPUT_INVALID",
    "Pass exactly the job function's keyword arguments, as JSON-encodable values without NUL characters.",
)
X_JOB_TENANT_MISMATCH = register(
    "X_JOB_TENANT_MISMATCH", "Enqueue under the tenant the input belongs to, or omit tenant_id/enqueued_by."
)
X_JOB_ENQUEUE_BATCH_TOO_LARGE = register(
    "X_JOB_ENQUEUE_BATCH_TOO_LARGE", "Split the inputs into calls of at most 10,000 each."
)
X_JOB_CALLED_DIRECTLY = register(
    "X_JOB_CALLED_DIRECTLY",
    "Call handle.enqueue(**input) to queue it, or ultimate_jobs.testing.run_job(handle, **input) in tests.",
)
X_JOB_NOT_FOUND = register("X_JOB_NOT_FOUND", "Check the id; finished jobs are purged after their retention.")
X_JOB_NOT_REQUEUEABLE = register(
    "X_JOB_NOT_REQUEUEABLE",
    "Only a finished job (done, failed, dead, cancelled) can be retried; cancel a live one first, or wait for it.",
)
X_JOB_NOT_CANCELLABLE = register(
    "X_JOB_NOT_CANCELLABLE", "The job already finished; nothing is running to stop. Retry it to run it again."
)
X_JOB_NOT_REMOVABLE = register(
    "X_JOB_NOT_REMOVABLE", "Cancel the running job first (it stops at its next heartbeat), then remove it."
)
X_JOB_NOT_PROMOTABLE = register(
    "X_JOB_NOT_PROMOTABLE", "Only a delayed job (or one backing off before a retry) can run now; retry a finished one."
)
X_JOB_NOT_REGISTERED = register(
    "X_JOB_NOT_REGISTERED", "Deploy the job's module to this process (an installed app's jobs.py) or fix the name."
)
X_JOB_CLAIM_QUEUES_EMPTY = register("X_JOB_CLAIM_QUEUES_EMPTY", "Name at least one queue to claim from.")
X_QUEUE_INVALID = register(
    "X_QUEUE_INVALID", "Use a queue name matching ^[a-z0-9][a-z0-9_.:-]{0,63}$, e.g. \"emails\" or \"billing.high\"."
)
X_OUTBOX_NO_TX = register(
    "X_OUTBOX_NO_TX", 'Wrap the enqueue in transaction.atomic() or set ULTIMATE_JOBS["OUTBOX"] to "auto".'
)
X_JOB_TIMEOUT = register("X_JOB_TIMEOUT", "Raise the job's timeout= or make the body check ctx.cancelled.")
X_ABORTED = register("X_ABORTED", "The run was cancelled; nothing more is written for it.")
X_DRAINING = register("X_DRAINING", "The worker is shutting down; the run goes back to the queue uncounted.")
X_JOB_LEASE_LOST = register(
    "X_JOB_LEASE_LOST", "The job was cancelled or reclaimed by another worker; raise VISIBILITY_TIMEOUT if it was slow."
)
X_JOB_SLOT_LOST = register("X_JOB_SLOT_LOST", "The fleet concurrency slot expired; check the worker's heartbeats.")
X_JOB_KEY_BUSY = register(
    "X_JOB_KEY_BUSY", 'Another run holds the concurrency key; use when_busy="wait" to queue behind it.'
)
X_TERMINAL = register("X_TERMINAL", "Fix the cause, then retry the job from the admin or `jobs retry`.")
X_RETRY_AFTER = register("X_RETRY_AFTER", "Nothing to fix: the job is retried after the stated delay.")
X_JOB_FAILED = register("X_JOB_FAILED", "Read last_error, fix the cause, then retry the job.")
X_JOB_RESULT_UNSERIALIZABLE = register(
    "X_JOB_RESULT_UNSERIALIZABLE", "Return JSON from the job body: str, int, float, bool, None, lists and dicts."
)
X_JOB_RESULT_TOO_LARGE = register(
    "X_JOB_RESULT_TOO_LARGE", "Return a small result (an id or a count) and keep the data in your own tables, or "
    "raise ULTIMATE_JOBS['MAX_RESULT_BYTES']."
)
X_TEXT_INVALID = register(
    "X_TEXT_INVALID", "Pass a short string without NUL (\\x00) characters; PostgreSQL cannot store NUL in text."
)
X_FAULTS_INVALID = register(
    "X_FAULTS_INVALID", "Fix ULTIMATE_JOBS_FAULTS (point=action pairs, see ultimate_jobs.faults) or unset it; "
    "set ULTIMATE_JOBS_FAULTS_ARMED=1 only in crash tests."
)
X_LEASE_LAPSED = register(
    "X_LEASE_LAPSED", "The worker died or stalled past VISIBILITY_TIMEOUT on the final attempt; retry the job."
)

X_TASK_DECLARATION_INVALID = register(
    "X_TASK_DECLARATION_INVALID",
    'Correct the named task() option: an IANA tz such as "Europe/Berlin", a five-field cron, '
    'catch_up "skip", "run-once" or "run-all", max_catch_up >= 1.',
)
X_TASK_DUPLICATE = register(
    "X_TASK_DUPLICATE", "Give each task its own name= (a name keys its watermark: keep it)."
)
X_TASK_NOT_FOUND = register(
    "X_TASK_NOT_FOUND", "Pass a task handle or the name of a task declared in an installed app's jobs module."
)


# -- durable runs (ultimate_jobs.runtime.steps, .events, .settled, .testing) ---------------------------
X_STEP_DUPLICATE = register(
    "X_STEP_DUPLICATE", "Give every step.run/sleep/wait_for_event in one run its own deterministic name."
)
X_STEP_OUTPUT_UNSERIALIZABLE = register(
    "X_STEP_OUTPUT_UNSERIALIZABLE",
    "Return a small JSON value from the step (str, int, float, bool, None, lists and dicts; no NaN, NUL or "
    "lone surrogates; under MAX_STEP_OUTPUT_BYTES): a cursor or an id, not a page of rows.",
)
X_STEP_OUTCOME_UNKNOWN = register(
    "X_STEP_OUTCOME_UNKNOWN",
    "Find out whether the once=True step's effect happened, then ops.resolve_step(id, name, ran=True, "
    "output=...) or ran=False, and retry the job.",
)
X_JOB_COMPENSATION_FAILED = register(
    "X_JOB_COMPENSATION_FAILED", "Fix the named compensator (or resolve its step), then retry the job: the "
    "retry continues the unwind."
)
X_JOB_ON_SETTLED_FAILED = register(
    "X_JOB_ON_SETTLED_FAILED", "Fix the on_settled hook; the job's outcome is unchanged. Record what must "
    "happen for certain inside a step instead."
)
X_JOB_CRASH_DIVERGED = register(
    "X_JOB_CRASH_DIVERGED", "Move the repeated effect inside a step.run (or make it idempotent): a crash "
    "re-runs everything outside the steps."
)
X_EVENT_INVALID = register(
    "X_EVENT_INVALID", "Publish a JSON object as the payload under an event name of 1-200 printable characters."
)
X_JOB_EVENT_INVALID = register(
    "X_JOB_EVENT_INVALID", "Publish a payload the wait's schema accepts (or widen the schema), then retry the job: "
    "the stored payload is checked again."
)
X_PROGRESS_INVALID = register(
    "X_PROGRESS_INVALID", "Call ctx.progress(done, total=None, note=None) with finite numbers >= 0 and a short note."
)
X_STEP_NOT_FOUND = register("X_STEP_NOT_FOUND", "Check the step name in ops.get_job(id)[\"steps\"].")
X_STEP_NOT_RESOLVABLE = register(
    "X_STEP_NOT_RESOLVABLE", "Resolve only a step that is started or failed, on a job that is not running."
)


# -- backfills (ultimate_jobs.factories.backfill) -------------------------------------------------
X_BACKFILL_ENVIRONMENT = register(
    "X_BACKFILL_ENVIRONMENT", 'Run the backfill where its environments= lists ULTIMATE_JOBS["ENVIRONMENT"], or add '
    "this environment to the declaration."
)
X_BACKFILL_MIGRATION_PENDING = register(
    "X_BACKFILL_MIGRATION_PENDING", "Run `python manage.py migrate` first; the pass is retried once the migration "
    "it requires= is applied."
)
X_BACKFILL_STALLED = register(
    "X_BACKFILL_STALLED", "Make count= and source= select the same rows (and handle= change what they select), "
    "then enqueue the backfill again."
)
X_BACKFILL_SOURCE_INVALID = register(
    "X_BACKFILL_SOURCE_INVALID", "Return a QuerySet of model instances with a single-column primary key from "
    "source=, unsliced: lambda ctx: Model.objects.filter(...)."
)
X_BACKFILL_NOT_FOUND = register(
    "X_BACKFILL_NOT_FOUND", "Name a backfill declared in an installed app's jobs module; "
    "`manage.py jobs_backfill --pending` lists them."
)


# -- webhooks and consumers (ultimate_jobs.factories.webhook, .webhook_receiver, .consumer) --------
X_WEBHOOK_ENDPOINT_UNKNOWN = register(
    "X_WEBHOOK_ENDPOINT_UNKNOWN", "Enqueue deliveries only for endpoints endpoint(**input) can find; a deleted "
    "endpoint's deliveries are dropped."
)
X_WEBHOOK_ENDPOINT_INVALID = register(
    "X_WEBHOOK_ENDPOINT_INVALID", "Give the endpoint an https:// URL whose host resolves to a public address (or "
    "declare webhook(allow_private=True) for an internal receiver you trust)."
)
X_WEBHOOK_ENDPOINT_DISABLED = register(
    "X_WEBHOOK_ENDPOINT_DISABLED", "Fix the receiver, then re-enable it: ModelLedger().enable(endpoint_id) (or "
    "clear disabled on your endpoint row); deliveries after that are sent again."
)
X_WEBHOOK_EVENT_UNKNOWN = register(
    "X_WEBHOOK_EVENT_UNKNOWN", "Enqueue deliveries only for events event(**input) can find."
)
X_WEBHOOK_EVENT_INVALID = register(
    "X_WEBHOOK_EVENT_INVALID", "Answer {\"id\", \"topic\", \"body\"} from event(**input): non-empty id and topic "
    "strings without ':', and a str, bytes or dict body."
)
X_WEBHOOK_DELIVERY_FAILED = register(
    "X_WEBHOOK_DELIVERY_FAILED", "None needed: the delivery is retried on the job's schedule; a receiver that "
    "keeps failing is disabled after disable_after attempts."
)
X_WEBHOOK_DELIVERY_THROTTLED = register(
    "X_WEBHOOK_DELIVERY_THROTTLED", "None needed: the next attempt waits the receiver's Retry-After."
)
X_WEBHOOK_DELIVERY_REJECTED = register(
    "X_WEBHOOK_DELIVERY_REJECTED", "Check what the receiver answers (status in the delivery ledger); a redirect is "
    "never followed: store the final URL on the endpoint."
)
X_WEBHOOK_SIGNATURE_INVALID = register(
    "X_WEBHOOK_SIGNATURE_INVALID", "Verify with the endpoint's current secret (a list during rotation) over the "
    "exact request bytes, before any parsing."
)
X_WEBHOOK_SIGNATURE_STALE = register(
    "X_WEBHOOK_SIGNATURE_STALE", "Check the receiving clock (NTP); a replayed old request is refused by design."
)
X_WEBHOOK_EVENT_ID_INVALID = register(
    "X_WEBHOOK_EVENT_ID_INVALID", "Answer an event id of 1-256 printable ASCII characters from verify(), read "
    "from signed data."
)
X_WEBHOOK_BODY_TOO_LARGE = register(
    "X_WEBHOOK_BODY_TOO_LARGE", "Raise webhook_receiver(max_bytes=...) if the sender's events are legitimately "
    "larger."
)
X_WEBHOOK_BODY_INVALID = register(
    "X_WEBHOOK_BODY_INVALID", "None needed on the receiving side: the signature was good but verify() could not "
    "parse the body (422); the sender must send the body format verify() reads."
)
X_WEBHOOK_METHOD_NOT_ALLOWED = register(
    "X_WEBHOOK_METHOD_NOT_ALLOWED", "Send events with POST; for a vendor's GET challenge pass "
    "webhook_receiver(handshake=...)."
)
X_WEBHOOK_RECEIVER_INVALID = register(
    "X_WEBHOOK_RECEIVER_INVALID", "Correct the named webhook_receiver() option: a relative Django path, callable "
    "verify, handle and handshake, max_bytes a whole number >= 1, dedupe_window a duration >= 0."
)
X_WEBHOOK_RECEIVER_UNAVAILABLE = register(
    "X_WEBHOOK_RECEIVER_UNAVAILABLE", "None needed by the sender: it redelivers after Retry-After; check the jobs "
    "database."
)
X_WEBHOOK_HTTPX_MISSING = register(
    "X_WEBHOOK_HTTPX_MISSING", "pip install 'ultimate-jobs[webhooks]' (outbound webhooks send with httpx)."
)
X_CONSUMER_INVALID = register(
    "X_CONSUMER_INVALID", "Correct the named consumer() option: callables for keys, open and handle, cursor=(load, "
    "save), batch a whole number >= 1, rearm whole minutes dividing an hour, and no timeout."
)
X_CONSUMER_SELF_ENQUEUE = register(
    "X_CONSUMER_SELF_ENQUEUE", "Do not enqueue the consumer from its own open/handle; its supervisor re-arms it."
)

# -- data factories (ultimate_jobs.factories: export_rows, import_rows, rollup, refresh_view, subject) --
X_EXPORT_SOURCE_INVALID = register(
    "X_EXPORT_SOURCE_INVALID", "Return an unsliced QuerySet with a single-column primary key from source=, "
    "e.g. lambda ctx, **input: Order.objects.filter(org=input[\"org\"])."
)
X_IMPORT_HEADER_MISMATCH = register(
    "X_IMPORT_HEADER_MISMATCH", "Make the file's first line name exactly the declared columns= (any order), "
    "or correct columns=."
)
X_IMPORT_RECORD_TOO_LARGE = register(
    "X_IMPORT_RECORD_TOO_LARGE", "Close the quote left open near the byte offset named, or raise max_record_bytes=."
)
X_IMPORT_TOO_MANY_ERRORS = register(
    "X_IMPORT_TOO_MANY_ERRORS", "Read the error report under error_prefix, fix the file, then import it again "
    "(or raise max_row_errors=)."
)
X_IMPORT_SOURCE_INVALID = register(
    "X_IMPORT_SOURCE_INVALID", "Upload the object before enqueueing the import, and make key= name it in storage()."
)
X_JOB_ROLLUP_INVALID = register(
    "X_JOB_ROLLUP_INVALID", "Give rollup() a positive lookback, a bucket of minute|hour|day|week|month, an IANA "
    "tz and a key= exactly matching a unique constraint of into."
)
X_JOB_REFRESH_VIEW_INVALID = register(
    "X_JOB_REFRESH_VIEW_INVALID", "Name a PostgreSQL materialized view (with a unique index when concurrently=True)."
)
X_TASKS_UNAVAILABLE = register(
    "X_TASKS_UNAVAILABLE", "Install the backport on Django 5.2 (`pip install ultimate-jobs[tasks]`), or use Django 6."
)
X_TASK_CONTEXT_INVALID = register(
    "X_TASK_CONTEXT_INVALID", "Call job_context(context) inside a running task, with the TaskContext it was given."
)
X_TASK_RETRY = register(
    "X_TASK_RETRY", "Nothing to fix: the task failed and runs again after its retry policy's delay."
)
X_TASK_PATH_REFUSED = register(
    "X_TASK_PATH_REFUSED", "Enqueue tasks through the backend (task.enqueue()), and define them in an installed "
    "app's module; a django_tasks row naming any other module is refused and nothing is imported."
)

X_SUBJECT_TREATMENT_INVALID = register(
    "X_SUBJECT_TREATMENT_INVALID", 'State "delete", {"anonymize": {field: value}} (existing fields; None only '
    'for nullable ones) or {"retain": "<why>"} for each reached model.'
)
X_SUBJECT_TABLE_UNDECLARED = register(
    "X_SUBJECT_TABLE_UNDECLARED", "Add the named model to define_subject(tables=...) with its treatment."
)
X_SUBJECT_CYCLE = register(
    "X_SUBJECT_CYCLE", "Make one foreign key in the loop of deleted tables nullable, so the erase can clear it first."
)
X_SUBJECT_ERASE_INCOMPLETE = register(
    "X_SUBJECT_ERASE_INCOMPLETE", "Give the named table a treatment that removes the column's value (delete, or "
    "anonymize that field), or retain it with a reason."
)

X_DB_PREPARED_STATEMENTS = register(
    "X_DB_PREPARED_STATEMENTS", 'Behind a transaction-mode pooler (PgBouncer before 1.21, Supavisor, RDS Proxy) set '
    'DATABASES[alias]["OPTIONS"] = {"prepare_threshold": None}: the pooler cannot keep a prepared statement.'
)

# SQLSTATEs a transaction-mode pooler answers when a prepared statement lands on another server
# session: duplicate_prepared_statement ("... already exists") and invalid_sql_statement_name
# ("... does not exist"). The store's statement names are its connection's own (psycopg's
# _pg3_N), so a clash between them means another client's session.
PREPARED_STATEMENT_STATES = frozenset({"42P05", "26000"})


def db_error_code(exc: BaseException) -> str | None:
    """The code of a database error whose cause is known and has a fix (the error or what it was
    raised from), else None: ``X_DB_PREPARED_STATEMENTS`` for a pooler's prepared-statement error."""
    seen: BaseException | None = exc
    for _ in range(5):  # Django's wrapper, the driver's error, and at most a few more
        if seen is None:
            break
        if getattr(seen, "sqlstate", None) in PREPARED_STATEMENT_STATES:
            return X_DB_PREPARED_STATEMENTS
        # The text covers what has no SQLSTATE of its own: a Bind to a statement of the same name
        # another client prepared on that server session ("bind message supplies 13 parameters, but
        # prepared statement "_pg3_0" requires 7", a protocol violation, 08P01).
        if 'prepared statement "' in str(seen):
            return X_DB_PREPARED_STATEMENTS
        seen = seen.__cause__ or seen.__context__
    return None


def db_error_note(exc: BaseException) -> str:
    """`` code=X_... fix: ...`` for a database error ``db_error_code`` knows, else "": what a
    warning about a failed statement appends, so the log names the cause wherever it shows."""
    code = db_error_code(exc)
    return f" code={code} fix: {CODES[code]}" if code else ""


class JobsError(Exception):
    """A refusal or failure with a code, a cause and a one-line fix."""

    code: str = X_INVARIANT

    def __init__(self, code: str | None = None, cause: str | None = None, fix: str | None = None) -> None:
        self.code = code or type(self).code
        if self.code not in CODES:
            raise ValueError(f"unregistered error code {self.code}")
        self.cause = cause or (type(self).__doc__ or "").strip() or self.code
        self.fix = fix or CODES[self.code]
        super().__init__(f"[{self.code}] {self.cause} Fix: {self.fix}")

    def __reduce__(self) -> tuple[Any, ...]:  # keeps the three parts when an error crosses a process boundary
        return (type(self), (self.code, self.cause, self.fix))


class JobCancelled(JobsError):
    """The run was cancelled."""

    code = X_ABORTED


class Terminal(JobsError):
    """The job failed in a way no retry can fix."""

    code = X_TERMINAL

    def __init__(self, cause: str = "", *, code: str | None = None, fix: str | None = None) -> None:
        super().__init__(code or X_TERMINAL, cause or None, fix)


class RetryAfter(JobsError):
    """The job asked to be retried after a delay."""

    code = X_RETRY_AFTER

    def __init__(self, seconds: float, cause: str = "", *, code: str | None = None) -> None:
        self.retry_after = float(seconds)
        super().__init__(code or X_RETRY_AFTER, cause or f"retry requested after {self.retry_after:g}s")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.retry_after, self.cause), {"code": self.code})
