"""URLs for the example project: the Django admin (the dead-letter console), the jobs metrics view
(``/jobs/metrics``: a logged-in user with ``ultimate_jobs.view_job``, or ``METRICS_TOKEN``) and the
shop's ``async def`` view that enqueues (``/shop/orders/<id>/paid``, served by ``asgi.py``)."""

from django.contrib import admin
from django.urls import include, path

from example_project.shop import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("jobs/", include("ultimate_jobs.urls")),
    path("shop/orders/<int:order_id>/paid", views.order_paid, name="order-paid"),
]
