"""URLs for the example project: the Django admin (the dead-letter console) and the jobs
metrics view (``/jobs/metrics``: a logged-in user with ``ultimate_jobs.view_job``, or
``METRICS_TOKEN``)."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [path("admin/", admin.site.urls), path("jobs/", include("ultimate_jobs.urls"))]
