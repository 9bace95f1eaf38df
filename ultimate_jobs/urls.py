"""Optional URLs: ``path("jobs/", include("ultimate_jobs.urls"))`` serves ``jobs/metrics``
(Prometheus; guarded by ``METRICS_TOKEN`` or the ``view_job`` permission, see ``views``) and every
declared ``webhook_receiver()`` under its own path."""

from __future__ import annotations

from django.urls import include, path

from ultimate_jobs import views
from ultimate_jobs.factories import webhook_receiver

app_name = "ultimate_jobs"
urlpatterns = [path("metrics", views.metrics, name="metrics"),
               path("", include(webhook_receiver.urlpatterns))]  # the live list: receivers declared later too
