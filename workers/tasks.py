"""Celery tasks: thin, named explicitly, each opening its own unit of work.

They are declared on no app (`shared_task`): each app workers.app.make_celery makes has them,
and a task reads the settings and sessions that app was made with (`task_context`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from celery import Celery, Task, shared_task
from celery.signals import celeryd_after_setup, worker_process_shutdown, worker_shutdown
from sqlalchemy.orm import Session, sessionmaker

from models import idempotency
from models.alerts import digests as alert_digests
from models.applications import outbox
from models.applications import service as applications
from models.core.dates import on_day, today_in, utcnow
from models.core.settings import Settings
from models.db import heartbeats
from models.db.unit_of_work import session_scope
from models.jobs import tombstones, upkeep
from models.notifications import queue as search_notifications
from models.syncs import processing as sync_work
from models.webhooks import delivery as webhook_deliveries
from workers import broker, delivery, enqueue, search_engines, syncing
from workers.app import make_celery, task_context
from workers.mail import relay
from workers.webhooks import delivery as webhook_delivery

log = logging.getLogger("jobpost.tasks")


def connect() -> None:
    """Connect the worker's signal handlers of this module: called by `jobpost worker`."""
    celeryd_after_setup.connect(_size_pool, weak=False, dispatch_uid="jobpost.size_pool")
    worker_process_shutdown.connect(_quit_smtp, weak=False, dispatch_uid="jobpost.quit_smtp")
    worker_shutdown.connect(_quit_smtp, weak=False, dispatch_uid="jobpost.quit_smtp_worker")


def _size_pool(instance: Any, **_: Any) -> None:
    """A threads pool runs `concurrency` deliveries at once, each holding a database
    connection from claim to mark: the engine keeps that many (workers.app.TaskContext)."""
    with contextlib.suppress(RuntimeError):  # an app not made by make_celery runs no task
        task_context(instance.app).size_pool(instance.concurrency)


def _quit_smtp(**_: Any) -> None:
    """QUIT every thread's connection (workers.mail.relay.RELAY), and close the ones kept to
    webhook receivers, as the worker stops, once its tasks are done; a prefork child ends
    with os._exit, which runs no atexit hook, so it does so here too."""
    relay.RELAY.close()
    webhook_delivery.close_clients()


@shared_task(name="jobpost.deliver", bind=True)
def deliver(task: Task, application_id: int, request_id: str | None = None) -> str:
    context = task_context(task.app)
    return delivery.deliver(context.sessions(), context.settings, application_id)


@shared_task(name="jobpost.deliver_report", bind=True)
def deliver_report(task: Task, report_id: int) -> str:
    """One attempt of the operator's email of a fraud report (C13), on the email queue."""
    context = task_context(task.app)
    return delivery.deliver_report(context.sessions(), context.settings, report_id)


@shared_task(name="jobpost.deliver_alert_mail", bind=True)
def deliver_alert_mail(task: Task, mail_id: int) -> str:
    """One attempt of one email of a job alert (C19), on the email queue."""
    context = task_context(task.app)
    return delivery.deliver_alert_mail(context.sessions(), context.settings, mail_id)


@shared_task(name="jobpost.deliver_notice", bind=True)
def deliver_notice(task: Task, notice_id: int) -> str:
    """One attempt of the notice of a flagged address (C22), on the email queue."""
    context = task_context(task.app)
    return delivery.deliver_notice(context.sessions(), context.settings, notice_id)


@shared_task(name="jobpost.deliver_receipt", bind=True)
def deliver_receipt(task: Task, receipt_id: int) -> str:
    """One attempt of one applicant's receipt (C20), on the email queue."""
    context = task_context(task.app)
    return delivery.deliver_receipt(context.sessions(), context.settings, receipt_id)


@shared_task(name="jobpost.deliver_webhook", bind=True)
def deliver_webhook(task: Task, delivery_id: int) -> str:
    """One attempt of one webhook delivery (C12), in any pool, on the webhooks queue; the
    delivery that waited for the place it frees is enqueued after it."""
    context = task_context(task.app)
    return webhook_delivery.deliver(
        context.sessions(),
        context.settings,
        delivery_id,
        hand_on=lambda ids: enqueue.deliver_webhooks(task.app, ids),
    )


@shared_task(name="jobpost.sync", bind=True)
def sync(task: Task, run_id: int, request_id: str | None = None) -> str:
    """Apply a sync run (C11), on the `syncs` queue; a run longer than one task's time is
    handed to the next task."""
    context = task_context(task.app)
    s = context.settings
    return syncing.process(
        context.sessions(),
        run_id,
        lease_seconds=s.sync_lease_seconds,
        timezone=s.timezone,
        budget_seconds=min(syncing.BUDGET_SECONDS, s.sync_lease_seconds / 2),
        hand_on=lambda held: enqueue.sync(task.app, held),
    )


def changed(task: str, count: int, what: str) -> int:
    """Each periodic task logs what it changed, once committed, and returns the count (C9)."""
    log.info("%s: %d %s", task, count, what, extra={"periodic_task": task, "changed": count})
    return count


def run_expire(factory: sessionmaker[Session], s: Settings, today: Any = None) -> int:
    day = today or today_in(s.timezone)
    count = upkeep.in_batches(factory, upkeep.expire, today=day)
    return changed("expire", count, f"active jobs closed before {day} archived")


def run_refresh(factory: sessionmaker[Session], s: Settings, today: Any = None) -> int:
    """Expiry first, then the refresh, then the job.expiring scan
    (models.jobs.upkeep.expire_and_refresh, C5, C12); each logged."""
    day = today or today_in(s.timezone)
    done = upkeep.expire_and_refresh(factory, today=day)
    changed("expire", done.expired, f"active jobs closed before {day} archived")
    refreshed = changed("refresh", done.refreshed, f"auto-refresh jobs re-published on {day}")
    # Their webhook deliveries go with the next sweep (a minute at most, C12).
    changed("expiring", done.expiring, f"job.expiring events for jobs closing {day} or soon")
    return refreshed


def run_purge(factory: sessionmaker[Session], s: Settings, today: Any = None) -> int:
    """Applications past their retention (C8) and idempotency keys past their 24 hours
    (C10). With `today` (C9's `--today`), the retention is counted back from that service date at
    the present time of day in JOBPOST_TIMEZONE, as if the task ran then."""
    days = s.application_retention_days
    now = utcnow() if today is None else on_day(s.timezone, today, utcnow())
    with session_scope(factory) as session:
        count = applications.purge(session, now=now, retention_days=days)
        keys = idempotency.purge(session, now=now)  # C14: the daily purge takes them too
        hooks = webhook_deliveries.purge(session, now=now, retention_days=days)  # C12
        # Endpoints failing for days with no new event would never be judged otherwise.
        webhook_deliveries.disable_failing(session, now=now, timing=webhook_delivery.timing(s))
        runs = sync_work.purge(session, now=now, retention_days=s.sync_retention_days)  # C11
        told = search_notifications.purge(session, now=now, retention_days=days)  # C18
        gone_days = s.change_feed_tombstone_days
        gone = tombstones.purge(session, now=now, retention_days=gone_days)  # C10
    what = (
        f"rows deleted ({count} finished applications older than {days} days, "
        f"{keys} idempotency keys past their 24 hours, "
        f"{hooks} finished webhook deliveries older than {days} days, "
        f"{runs} sync runs finished {s.sync_retention_days} days ago, "
        f"{told} search-engine notifications finished {days} days ago, "
        f"{gone} deleted jobs' tombstones older than {gone_days} days)"
    )
    return changed("purge", count + keys + hooks + runs + told + gone, what)


def run_sweep(
    factory: sessionmaker[Session], s: Settings, today: Any = None, *, celery: Celery | None = None
) -> int:
    """Enqueue what is due through `celery` (by default an app made for `s`, closed after);
    entries stay marked enqueued even if the broker refuses, and come round again after the
    grace period. On the embedded broker, the messages workers have taken are deleted too
    (the transport keeps them: `workers.broker.forget_taken`)."""
    with session_scope(factory) as session:
        ids = outbox.sweep(session, now=utcnow(), timing=delivery.timing(s))
        mails = outbox.sweep(session, now=utcnow(), timing=delivery.timing(s), box=outbox.REPORTS)
        alert_mails = outbox.sweep(
            session, now=utcnow(), timing=delivery.timing(s), box=outbox.ALERTS
        )
        receipts = outbox.sweep(
            session, now=utcnow(), timing=delivery.timing(s), box=outbox.RECEIPTS
        )
        notices = outbox.sweep(session, now=utcnow(), timing=delivery.timing(s), box=outbox.NOTICES)
        hooks = webhook_deliveries.sweep(session, now=utcnow(), timing=webhook_delivery.timing(s))
        runs = sync_work.sweep(session, now=utcnow(), grace_seconds=s.outbox_sweep_grace_seconds)
    sender = celery or make_celery(s)
    try:
        for application_id in ids:
            enqueue.deliver(sender, application_id)
        for report_id in mails:  # C13: the operator's emails of reports
            enqueue.deliver_report(sender, report_id)
        for mail_id in alert_mails:  # C19: job alerts' emails
            enqueue.deliver_alert_mail(sender, mail_id)
        for receipt_id in receipts:  # C20: applicants' receipts
            enqueue.deliver_receipt(sender, receipt_id)
        for notice_id in notices:  # C22: notices of flagged addresses
            enqueue.deliver_notice(sender, notice_id)
        enqueue.deliver_webhooks(sender, hooks)
        for run_id in runs:  # C11: lost messages, leases run out
            enqueue.sync(sender, run_id)
    finally:
        if celery is None:
            sender.close()
    try:
        broker.forget_taken(s.broker_url)
    except Exception as e:  # the next sweep tries again; what is due was enqueued all the same
        log.warning("sweep: cannot delete the broker's taken messages: %s", e)
    return changed(
        "sweep",
        len(ids) + len(mails) + len(alert_mails) + len(receipts) + len(hooks) + len(runs),
        f"outbox entries ({len(ids)} copies, {len(mails)} report emails, {len(alert_mails)} "
        f"alert emails, {len(receipts)} receipts), webhook deliveries "
        f"and {len(runs)} sync runs enqueued",
    )


def run_notify(factory: sessionmaker[Session], s: Settings, today: Any = None) -> int:
    """The search engines told of the job pages queued for them (C18): nothing while no
    channel is configured."""
    found = search_engines.send(factory, s)
    told = ", ".join(f"{n} to {channel}" for channel, n in found.items()) or "no channel on"
    return changed("notify", sum(found.values()), f"search-engine notifications sent ({told})")


def run_digests(
    factory: sessionmaker[Session], s: Settings, today: Any = None, *, celery: Celery | None = None
) -> int:
    """The job alerts' digests (C19): one pending per due alert with new jobs, each enqueued
    through `celery` (by default an app made for `s`, closed after) once its batch has
    committed; one the broker refuses goes with a sweep. The clock's own time, whatever
    `today`: a digest planned at another time would be due then, not now."""
    sender = celery or make_celery(s)
    try:
        planned = alert_digests.plan(
            factory,
            now=utcnow(),
            today=today_in(s.timezone),
            lag_seconds=s.change_feed_lag_seconds,
            hand_on=lambda ids: [enqueue.deliver_alert_mail(sender, i) for i in ids],
        )
    finally:
        if celery is None:
            sender.close()
    what = f"digests queued for the due alerts of {planned.searches} searches"
    return changed("digests", planned.queued, what)


RUNNERS = {
    "expire": run_expire,
    "refresh": run_refresh,
    "sweep": run_sweep,
    "purge": run_purge,
    "notify": run_notify,
    "digests": run_digests,
}


def periodic(task: Task, run: Callable[[sessionmaker[Session], Settings], int]) -> int:
    """A periodic task's work, then its heartbeat (models.db.heartbeats): the time it last
    succeeded, which /metrics shows. A heartbeat that cannot be written is logged, not
    raised: the work is done and committed, and the next run writes it."""
    context = task_context(task.app)
    sessions = context.sessions()
    changed = run(sessions, context.settings)
    try:
        with session_scope(sessions) as session:
            heartbeats.beat(session, task.name, now=utcnow())
    except Exception as e:
        log.warning("%s: cannot record its heartbeat: %s", task.name, e)
    return changed


@shared_task(name="jobpost.expire", bind=True)
def expire(task: Task) -> int:
    return periodic(task, run_expire)


@shared_task(name="jobpost.refresh", bind=True)
def refresh(task: Task) -> int:
    return periodic(task, run_refresh)


@shared_task(name="jobpost.sweep", bind=True)
def sweep(task: Task) -> int:
    return periodic(task, lambda sessions, s: run_sweep(sessions, s, celery=task.app))


@shared_task(name="jobpost.purge", bind=True)
def purge(task: Task) -> int:
    return periodic(task, run_purge)


@shared_task(name="jobpost.digests", bind=True)
def plan_digests(task: Task) -> int:
    return periodic(task, lambda sessions, s: run_digests(sessions, s, celery=task.app))


@shared_task(name="jobpost.notify_search_engines", bind=True)
def notify_search_engines(task: Task) -> int:
    return periodic(task, run_notify)
