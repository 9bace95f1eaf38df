"""URLs for the example project: the Django admin (where the jobs tables show up)."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
