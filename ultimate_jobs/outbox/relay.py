"""The outbox relay: publish committed outbox rows as jobs, in order, each exactly once.

An enqueue inside ``transaction.atomic()`` stages an outbox row in the caller's transaction
(``ultimate_jobs.enqueue``); the relay turns committed rows into jobs under the ids they were
staged with.

Usage::

    python manage.py jobs_relay            # until SIGTERM (jobs_worker runs it as the relay role)
    python manage.py jobs_relay --burst    # until no claimable row is left
    # in tests and embedded use:
    from ultimate_jobs.outbox import Relay
    Relay().run_once()                     # one pass -> the number of rows published

Options (default): ``batch_size`` (``RELAY_BATCH_SIZE``, 500), ``lease`` (``CLAIM_LEASE``, 30s),
``burst`` (False: return once a pass claims nothing), ``database`` (``DATABASE``), ``relay_id``
(``relay:<host>:<pid>:<random>``), ``on_pass`` (None: a ``(relay, published)`` callback).
Published rows are deleted after ``OUTBOX_RETENTION`` (1d), checked once a minute.

A pass: claim a batch as a lease (one statement stamps ``claimed_at``/``claimed_by``, in
``(staged_at, id)`` order, never past a row of the same transaction another claim holds), then
one transaction inserts the batch's jobs (one bulk enqueue, deduplicated as usual) and marks the
rows published with the job each became, fenced on ``claimed_by``. The insert and the mark commit
together, so a relay that dies between them has published nothing and its rows are claimable
again after ``CLAIM_LEASE``; a relay whose lease another relay took finds the mark short and
rolls its insert back. A batch that fails is retried row by row, in order: rows before the
failing one are published, the failing row keeps its claim (retried after ``CLAIM_LEASE``;
rows of its transaction wait behind it), later rows are released for the next pass. A lost
connection releases the whole batch instead; after a failed pass every connection the pass
left broken (to this database or to one a routed row was published into) is closed, so the
next pass dials afresh once the server answers.

Logged events: ``jobs.outbox.relay-started``, ``jobs.outbox.relay-stopped``,
``jobs.outbox.published``, ``jobs.outbox.batch-failed``, ``jobs.outbox.publish-failed`` (names
the poison row), ``jobs.outbox.lease-lost``, ``jobs.outbox.tick-failed``, ``jobs.outbox.purged``,
``jobs.outbox.killed``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, connections, transaction

from ultimate_jobs import clock, faults
from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import OUTBOX_CHANNEL, JobRow, close_connection, release_broken_connections, store_for
from ultimate_jobs.db.routing import alias_for_queue, group_queues
from ultimate_jobs.durations import to_seconds
from ultimate_jobs.enqueue import submit
from ultimate_jobs.errors import X_CONFIG_INVALID, JobsError, db_error_code
from ultimate_jobs.models import Job
from ultimate_jobs.service_loop import LoopedService, ServiceLoop, Stoppable

log = logging.getLogger("ultimate_jobs")

PURGE_EVERY = 60.0  # seconds between retention sweeps
PURGE_BATCH = 1000  # rows per DELETE statement
PURGE_MAX = 50_000  # rows per sweep: a backlog is worked off over several sweeps
_CONNECTION_ERRORS = (OperationalError, InterfaceError)


class _LeaseLost(Exception):
    """The publish transaction's mark matched fewer rows than it published: another relay holds them."""


class Relay(LoopedService):
    """One relay's loop; see the module docstring."""

    def __init__(self, *, database: str | None = None, batch_size: int | None = None, lease: Any = None,
                 burst: bool = False, relay_id: str | None = None,
                 on_pass: Callable[[Relay, int], None] | None = None) -> None:
        conf = get_settings()
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size < 1):
            raise JobsError(X_CONFIG_INVALID, f"batch_size={batch_size!r} must be a whole number >= 1.")
        self.alias = database or conf.DATABASE
        self.store = store_for(self.alias)
        self.batch_size = batch_size or conf.RELAY_BATCH_SIZE
        self.lease = conf.CLAIM_LEASE if lease is None else to_seconds(lease, subject="lease")
        self.retention = conf.OUTBOX_RETENTION
        self.relay_id = relay_id or f"relay:{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"
        self.poll_interval = conf.POLL_INTERVAL
        self.idle_poll_max = max(conf.IDLE_POLL_MAX, conf.POLL_INTERVAL)
        self.on_pass = on_pass
        self.stats = {"published": 0, "failed": 0, "passes": 0}
        self.claimed_last = 0
        self._loop = ServiceLoop(burst=burst, on_signal=lambda signum: self.stop(), on_second_signal=self._killed)
        self._idle = self.poll_interval
        self._listener: Stoppable | None = None
        self._last_purge = -PURGE_EVERY

    # -- one pass -----------------------------------------------------------------------------

    def run_once(self) -> int:
        """One pass: claim a batch, publish it; answer how many rows were published."""
        self._purge_due()
        batch = self.store.outbox_claim(relay_id=self.relay_id, limit=self.batch_size, lease=self.lease,
                                        now=clock.sql_now())
        self.claimed_last = len(batch)
        published = self._publish(batch) if batch else 0
        self.stats["published"] += published
        self.stats["passes"] += 1
        if self.on_pass is not None:
            self.on_pass(self, published)
        return published

    def _publish(self, batch: list[JobRow]) -> int:
        try:
            self._commit(batch)
        except _LeaseLost as lost:
            log.warning("jobs.outbox.lease-lost relay=%s rows=%s: %s; nothing published", self.relay_id,
                        len(batch), lost)
            return 0
        except _CONNECTION_ERRORS:
            self._release([r.id for r in batch])
            raise
        except DatabaseError as exc:
            if db_error_code(exc):  # a setup error (a pooler's prepared statements), not a poison row
                self._release([r.id for r in batch])
                raise
            log.warning("jobs.outbox.batch-failed relay=%s rows=%s error=%r: publishing row by row",
                        self.relay_id, len(batch), exc)
            return self._publish_one_by_one(batch)
        log.info("jobs.outbox.published relay=%s count=%s", self.relay_id, len(batch))
        return len(batch)

    def _commit(self, batch: Sequence[JobRow]) -> None:
        """Insert the jobs and mark the rows in one transaction; raise ``_LeaseLost`` (rolled back)
        when the fenced mark finds rows this relay no longer holds."""
        with transaction.atomic(using=self.alias):
            published = self._insert_routed(batch) if get_settings().QUEUE_DATABASES else [
                (r.id, result.id) for r, result in zip(batch, submit(list(batch), database=self.alias,
                                                                     direct=True), strict=True)]
            faults.fault("relay_after_publish_before_mark")
            marked = self.store.outbox_mark_published(
                published=published,
                relay_id=self.relay_id, now=clock.sql_now())
            if len(marked) != len(batch):
                raise _LeaseLost(f"{len(batch) - len(marked)} of the rows are held by another relay")

    def _insert_routed(self, batch: Sequence[JobRow]) -> list[tuple[Any, Any]]:
        """Insert the batch's jobs, each on its queue's alias (``QUEUE_DATABASES``); answer
        ``(outbox id, job id)`` pairs in order. A row routed to another database is committed there
        before this relay's mark (two databases share no transaction): a relay that dies between
        the two leaves a row the next claim publishes again, and it finds its job already there
        under the staged id, so the job is not inserted twice."""
        local = [r for r in batch if alias_for_queue(r.queue, home=self.alias) == self.alias]
        answers = dict(zip([r.id for r in local], [a.id for a in submit(local, database=self.alias, direct=True)],
                           strict=True)) if local else {}
        for target, queues in group_queues({r.queue for r in batch}, home=self.alias).items():
            if target == self.alias:
                continue
            rows = [r for r in batch if r.queue in queues]
            there = set(Job.objects.using(target).filter(id__in=[r.id for r in rows]).values_list("id", flat=True))
            fresh = [r for r in rows if r.id not in there]
            answers.update({r.id: r.id for r in rows if r.id in there})
            if fresh:
                with transaction.atomic(using=target):
                    answers.update(zip([r.id for r in fresh],
                                       [a.id for a in submit(fresh, database=target, direct=True)], strict=True))
        return [(r.id, answers[r.id]) for r in batch]

    def _publish_one_by_one(self, batch: list[JobRow]) -> int:
        """The fallback after a failed batch: in order, up to the failing row."""
        for index, record in enumerate(batch):
            try:
                self._commit([record])
            except _LeaseLost as lost:
                log.warning("jobs.outbox.lease-lost relay=%s outbox_id=%s: %s", self.relay_id, record.id,
                            lost)
                return index
            except _CONNECTION_ERRORS:
                self._release([r.id for r in batch[index:]])
                raise
            except DatabaseError as exc:
                if db_error_code(exc):
                    self._release([r.id for r in batch[index:]])
                    raise
                self.stats["failed"] += 1
                # The poison row keeps its claim, so it is retried after CLAIM_LEASE and not every
                # pass; the claim also holds back the rows staged after it in its transaction.
                log.error("jobs.outbox.publish-failed relay=%s outbox_id=%s name=%s queue=%s "
                          "position=%s/%s error=%r: published %s before it, released %s after it, "
                          "retry in %.0fs", self.relay_id, record.id, record.name, record.queue, index + 1,
                          len(batch), exc, index, len(batch) - index - 1, self.lease)
                self._release([r.id for r in batch[index + 1:]])
                return index
        return len(batch)

    def _release(self, ids: list[Any]) -> None:
        if not ids:
            return
        try:
            self.store.outbox_release(ids=ids, relay_id=self.relay_id)
        except DatabaseError as exc:  # the rows come back when the lease lapses
            log.warning("jobs.outbox.release-failed relay=%s rows=%s error=%r", self.relay_id, len(ids), exc)

    def _purge_due(self) -> None:
        """Delete published rows past ``OUTBOX_RETENTION``, in statements of ``PURGE_BATCH``, once
        every ``PURGE_EVERY``; a sweep stops after ``PURGE_MAX`` rows so publishing is not held up."""
        now = time.monotonic()
        if now - self._last_purge < PURGE_EVERY:
            return
        self._last_purge = now
        deleted = 0
        while deleted < PURGE_MAX and not self._loop.stopping.is_set():
            batch = self.store.outbox_purge(retention=self.retention, now=clock.sql_now(), limit=PURGE_BATCH)
            deleted += batch
            if batch < PURGE_BATCH:
                break
        if deleted:
            log.info("jobs.outbox.purged relay=%s count=%s", self.relay_id, deleted)

    def drain(self) -> int:
        """Publish until a pass claims nothing; answer the rows published. A failed pass is
        logged and ends it."""
        published = 0
        while not self._loop.stopping.is_set():
            try:
                published += self.run_once()
            except Exception as exc:  # the caller goes on with what was published
                log.warning("jobs.outbox.tick-failed relay=%s error=%r", self.relay_id, exc)
                release_broken_connections()
                break
            if not self.claimed_last:
                break
        return published

    def burst_pass(self) -> bool:
        """One pass for ``jobs_worker --burst``, asked whenever nothing is runnable, so a backlog is
        published and run a batch at a time; True when it claimed rows (more may be runnable or
        claimable now), False when nothing was left to claim or the pass failed."""
        try:
            self.run_once()
        except Exception as exc:  # the burst worker exits with what it ran
            log.warning("jobs.outbox.tick-failed relay=%s error=%r", self.relay_id, exc)
            release_broken_connections()
            return False
        return self.claimed_last > 0

    # -- the loop -------------------------------------------------------------------------------

    def wake(self, queue: str = "") -> None:
        self._loop.wake()

    def stop(self) -> None:
        """Stop after the pass in flight (its publish and mark commit or roll back together)."""
        self._loop.stop()

    def _killed(self, signum: int) -> None:
        log.warning("jobs.outbox.killed relay=%s signal=%s: second signal, exiting at once", self.relay_id, signum)
        os._exit(1)

    def _tick(self) -> float | None:
        self.run_once()
        if self.claimed_last:
            self._idle = self.poll_interval
            return 0.0  # claim again at once: more may be waiting behind this batch
        # POLL_INTERVAL right after activity (a staged row whose wake the per-process throttle
        # dropped waits at most that long), then doubling up to IDLE_POLL_MAX.
        # While the wake is unproven (jobs.wake.unverified), no doubling: nothing else will wake it.
        unverified = bool(getattr(self._listener, "unverified", False))
        wait, self._idle = self._idle, self.poll_interval if unverified else min(self._idle * 2, self.idle_poll_max)
        return self._loop.idle(wait)

    def _tick_failed(self, exc: Exception, delay: float) -> None:
        # A relay outlives a bad pass; its rows wait for the next one.
        if not self._loop.classified(exc, role=f"relay {self.relay_id}", alias=self.alias):
            log.warning("jobs.outbox.tick-failed relay=%s error=%r retry_in=%.2fs", self.relay_id, exc, delay)
        close_connection(self.alias)

    def _listen(self) -> Stoppable | None:
        self._listener = None if self.burst else self.store.listen(channel=OUTBOX_CHANNEL, on_wake=self.wake)
        return self._listener

    def run(self, *, install_signals: bool = True) -> dict[str, int]:
        """Publish until stopped (or, with ``burst``, until a pass claims nothing); answer the counts."""
        log.info("jobs.outbox.relay-started relay=%s batch=%s lease=%.1fs", self.relay_id, self.batch_size,
                 self.lease)
        self._idle = self.poll_interval
        try:
            self._loop.run(self._tick, errors=(Exception,), on_error=self._tick_failed,
                           install_signals=install_signals, listen=self._listen)
        finally:
            if threading.current_thread() is not threading.main_thread():
                # A role thread's connections die with it: this database's, and those a routed
                # publish opened to other databases.
                connections.close_all()
            log.info("jobs.outbox.relay-stopped relay=%s published=%s failed=%s", self.relay_id,
                     self.stats["published"], self.stats["failed"])
        return dict(self.stats)
