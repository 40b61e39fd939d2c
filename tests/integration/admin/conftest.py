"""The clients the admin's tests log in with: a superuser, and a staff viewer."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client


@pytest.fixture
def admin_client(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    return client


@pytest.fixture
def viewer_client(client: Client) -> Client:
    """A staff user who may look at jobs and runners but not act on them."""
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_job", "view_runnerprocess"])
    )
    client.force_login(user)
    return client
