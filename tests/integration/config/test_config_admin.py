"""The live config in the admin: one row, validated, never saved invalid."""

from __future__ import annotations

import dataclasses
import re

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
        ({"max_concurrent": 0}, "max_concurrent must be between 1 and 1000."),
        ({"poll_interval_ms": 0}, "poll_interval_ms must be between 1 and 3600000."),
        ({"max_attempts": 0}, "max_attempts must be between 1 and 1000."),
        ({"lease_seconds": 0}, "lease_seconds must be between 1 and 86400."),
        ({"max_concurrent": 100_000}, "max_concurrent must be between 1 and 1000."),
        ({"poll_interval_ms": 10_000_000}, "poll_interval_ms must be between 1 and 3600000."),
        ({"retry_base_seconds": 600, "retry_max_seconds": 60}, "must not exceed the ceiling"),
        ({"retention_days": -1}, "retention_days must be between 0 and 3650."),
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


def test_heartbeat_seconds_and_hard_kill_after_are_edited_on_the_config_page_under_failover(
    admin_client,
):
    """Issue 36 found the admin could not edit these two; issue 35's declared
    keys made the page edit every key. Proved here by name, as an operator
    would look for them: an input each in the Failover section, and saved."""
    page = admin_client.get(change_url()).content.decode()
    section = page[page.index(">Failover<") :]
    for name in ("heartbeat_seconds", "hard_kill_after"):
        assert f'name="{name}"' in section, f"{name} has an input in the Failover section"
    response = admin_client.post(change_url(), form(heartbeat_seconds=3, hard_kill_after=0))
    assert response.status_code == 302, response.content.decode()[:2000]
    row = JobsConfig.load()
    assert (row.heartbeat_seconds, row.hard_kill_after) == (3, 0), "both are saved"


@pytest.mark.parametrize("key", DECLARED, ids=lambda key: key.name)
def test_each_keys_input_allows_exactly_its_declared_bounds(admin_client, key):
    """The browser's own check and the server's agree: an input whose `min` was
    0 let max_concurrent=0 through to be refused by the server in other words,
    after the browser had refused -1 with "must be >= 0"."""
    page = admin_client.get(change_url()).content.decode()
    field = re.search(rf'<input[^>]*name="{key.name}"[^>]*>', page)
    assert field is not None, f"{key.name} has an input"
    assert f'min="{key.low}"' in field.group(), f"its min is the declared {key.low}"
    assert f'max="{key.high}"' in field.group(), f"its max is the declared {key.high}"


@pytest.mark.parametrize("value", [-1, 0, 1001])
def test_max_concurrent_out_of_bounds_gets_one_message_naming_the_bounds(admin_client, value):
    response = admin_client.post(change_url(), form(max_concurrent=value))
    errors = response.context["adminform"].form.errors["max_concurrent"]
    assert errors == ["max_concurrent must be between 1 and 1000."], (
        "one message, the same for every value past either bound"
    )
    assert JobsConfig.load().max_concurrent == DEFAULTS.max_concurrent, "nothing was saved"
