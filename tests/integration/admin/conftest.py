"""Admin fixtures: a superuser client and a view-only staff client."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client


@pytest.fixture
def admin_client_(transactional_db: None) -> Client:
    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def viewer_client(transactional_db: None) -> Client:
    user = User.objects.create_user("support", "support@example.com", "pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_job", content_type__app_label="ultimate_jobs"))
    client = Client()
    client.force_login(user)
    return client
