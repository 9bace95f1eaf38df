"""Optional URLs: ``path("jobs/", include("ultimate_jobs.urls"))`` serves ``jobs/metrics``
(Prometheus; guarded by ``METRICS_TOKEN`` or the ``view_job`` permission, see ``views``)."""

from __future__ import annotations

from django.urls import path

from ultimate_jobs import views

app_name = "ultimate_jobs"
urlpatterns = [path("metrics", views.metrics, name="metrics")]
