"""The live config in the admin: one row, validated, never saved invalid."""

from __future__ import annotations

import dataclasses

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from jobs.config import DECLARED, DEFAULTS, KEYS
from jobs.models import JobsConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    user = User.objects.create_superuser("ops", "ops@example.com", "pw")
    client.force_login(user)
    return client


def change_url() -> str:
    return reverse("admin:jobs_jobsconfig_change", args=[JobsConfig.load().pk])


def form(**overrides: int) -> dict[str, int]:
    values = {name: getattr(DEFAULTS, name) for name in KEYS}
    values.update(overrides)
    return values


def test_the_config_list_goes_straight_to_the_one_row(admin_client):
    response = admin_client.get(reverse("admin:jobs_jobsconfig_changelist"))
    assert response.status_code == 302
    assert response["Location"] == change_url()


def test_the_admin_offers_no_way_to_add_a_second_row_or_delete_the_one(admin_client):
    JobsConfig.load()
    assert admin_client.get(reverse("admin:jobs_jobsconfig_add")).status_code == 403
    delete = reverse("admin:jobs_jobsconfig_delete", args=[JobsConfig.SINGLETON_ID])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert JobsConfig.objects.count() == 1


def test_each_field_says_what_it_bounds_and_when_a_change_takes_effect(admin_client):
    page = admin_client.get(change_url()).content.decode()
    for phrase in ("at once", "queued from now on", "next claim", "sweep"):
        assert phrase in page, f"the form's help text explains the grain: {phrase!r}"


def test_the_form_edits_exactly_the_declared_keys_in_declared_order(admin_client):
    """A key left off the form would be ignored when posted: Django drops unknown fields."""
    form_fields = admin_client.get(change_url()).context["adminform"].form.fields
    assert list(form_fields) == list(KEYS)


def test_a_change_to_every_key_at_once_is_saved(admin_client):
    changed = {key.name: key.default + 1 for key in DECLARED}
    response = admin_client.post(change_url(), changed)
    assert response.status_code == 302, response.content.decode()[:2000]
    row = JobsConfig.load()
    assert {name: getattr(row, name) for name in KEYS} == changed


@pytest.mark.parametrize("key", DECLARED, ids=lambda key: key.name)
def test_each_declared_key_is_editable_in_the_admin_with_its_help(admin_client, key):
    page = admin_client.get(change_url()).content.decode()
    assert f'name="{key.name}"' in page, "the form has an input for the key"
    assert key.help in page, "and shows its declared help"
    response = admin_client.post(change_url(), form(**{key.name: key.default + 1}))
    assert response.status_code == 302, response.content.decode()[:2000]
    assert JobsConfig.load().as_settings() == dataclasses.replace(
        DEFAULTS, **{key.name: key.default + 1}
    ), "the change to this key, and only it, is saved"


def test_a_valid_change_is_saved(admin_client):
    response = admin_client.post(change_url(), form(max_concurrent=16, poll_interval_ms=250))
    assert response.status_code == 302, response.content.decode()[:2000]
    row = JobsConfig.load()
    assert (row.max_concurrent, row.poll_interval_ms) == (16, 250)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"max_concurrent": 0}, "greater than or equal to 1"),
        ({"poll_interval_ms": 0}, "greater than or equal to 1"),
        ({"max_attempts": 0}, "greater than or equal to 1"),
        ({"lease_seconds": 0}, "greater than or equal to 1"),
        ({"max_concurrent": 100_000}, "less than or equal to 1000"),
        ({"poll_interval_ms": 10_000_000}, "less than or equal to 3600000"),
        ({"retry_base_seconds": 600, "retry_max_seconds": 60}, "must not exceed the ceiling"),
        ({"retention_days": -1}, "greater than or equal to 0"),
    ],
)
def test_an_invalid_value_gets_a_form_error_and_is_never_saved(admin_client, values, message):
    before = JobsConfig.load().as_settings()
    response = admin_client.post(change_url(), form(**values))
    assert response.status_code == 200, "the form is shown again rather than saved"
    assert message in response.content.decode(), f"the error says why: {message!r}"
    assert JobsConfig.load().as_settings() == before, "nothing was saved"


def test_a_staff_user_without_permission_cannot_change_the_config(client):
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    client.force_login(user)
    before = JobsConfig.load().as_settings()
    response = client.post(change_url(), form(max_concurrent=50))
    assert response.status_code == 403
    assert JobsConfig.load().as_settings() == before


def test_the_row_starts_from_settings_jobs_and_the_defaults(settings):
    settings.JOBS = {"max_concurrent": 12}
    row = JobsConfig.load()
    assert row.max_concurrent == 12, "the first row takes settings.JOBS"
    assert row.lease_seconds == DEFAULTS.lease_seconds, "and the defaults for the rest"
    settings.JOBS = {"max_concurrent": 2}
    assert JobsConfig.load().max_concurrent == 12, "afterwards the row is the truth"
