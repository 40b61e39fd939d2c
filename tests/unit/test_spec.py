"""`JobSpec`: the builders make new specs, and `validate` refuses every spec that can
never be queued, naming the field at fault, before anything is written."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from freezegun import freeze_time
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs import InvalidJobSpec, JobSpec
from jobs.spec import KEY_MAX_LENGTH, KIND_MAX_LENGTH, MAX_ATTEMPTS_LIMIT, PAYLOAD_MAX_BYTES

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def spec(**fields: Any) -> JobSpec:
    """A valid spec with `fields` replaced (no validation on construction)."""
    return dataclasses.replace(JobSpec(kind="test.kind", key="k", run_at=T0), **fields)


def payload_of_size(size: int) -> dict[str, str]:
    """A payload whose JSON text is exactly `size` bytes."""
    overhead = len(json.dumps({"p": ""}))
    return {"p": "x" * (size - overhead)}


# -- builders -------------------------------------------------------------------


@freeze_time(T0)
def test_now_builds_a_spec_that_runs_as_soon_as_a_runner_can_take_it():
    built = JobSpec.now("orders.ship", "ord-1")
    assert (built.kind, built.key) == ("orders.ship", "ord-1"), "now() keeps kind and key"
    assert built.run_at == T0, "now() runs at the current instant"
    assert built.payload == {}, "now() has an empty payload"
    assert built.deadline is None, "now() has no deadline"
    assert built.max_attempts is None, "now() takes the configured attempt budget"


def test_two_specs_never_share_one_payload_dict():
    """A mutable default shared between specs would leak one job's payload into another's."""
    first, second = JobSpec.now("k", "a"), JobSpec.now("k", "b")
    first.payload["x"] = 1
    assert second.payload == {}, "each spec gets its own empty payload"


def test_with_payload_builds_a_new_spec_and_leaves_the_original_unchanged():
    original = spec()
    built = original.with_payload({"order_id": "ord-1"})
    assert built.payload == {"order_id": "ord-1"}, "the new spec carries the payload"
    assert original.payload == {}, "the original spec is unchanged"
    assert dataclasses.replace(built, payload={}) == original, "nothing else changed"


def test_with_deadline_builds_a_new_spec_and_none_clears_it():
    original = spec()
    deadline = T0 + timedelta(hours=1)
    built = original.with_deadline(deadline)
    assert built.deadline == deadline, "the new spec carries the deadline"
    assert original.deadline is None, "the original spec is unchanged"
    assert built.with_deadline(None).deadline is None, "with_deadline(None) removes the deadline"
    assert dataclasses.replace(built, deadline=None) == original, "nothing else changed"


def test_with_delay_runs_no_sooner_than_the_delay_from_now():
    """The delay counts from when it is applied, not from the spec's earlier run_at."""
    with freeze_time(T0) as frozen:
        original = JobSpec.now("k", "a")
        frozen.tick(timedelta(minutes=1))
        built = original.with_delay(timedelta(minutes=10))
    assert built.run_at == T0 + timedelta(minutes=11), "run_at is now plus the delay"
    assert original.run_at == T0, "the original spec is unchanged"
    assert dataclasses.replace(built, run_at=T0) == original, "nothing else changed"


def test_a_delay_past_the_latest_date_a_row_can_hold_is_an_invalid_spec_not_an_overflow():
    with pytest.raises(InvalidJobSpec, match="past the latest date a job can hold"):
        JobSpec.now("k", "a").with_delay(timedelta(days=5_000_000))


def test_with_max_attempts_builds_a_new_spec_and_leaves_the_original_unchanged():
    original = spec()
    built = original.with_max_attempts(9)
    assert built.max_attempts == 9, "the new spec carries its own attempt budget"
    assert original.max_attempts is None, "the original spec is unchanged"
    assert built.with_max_attempts(None).max_attempts is None, "None returns to the configured"


def test_builders_chain_into_one_spec():
    with freeze_time(T0):
        built = (
            JobSpec.now("k", "a")
            .with_payload({"n": 1})
            .with_delay(timedelta(seconds=30))
            .with_deadline(T0 + timedelta(hours=2))
            .with_max_attempts(3)
        )
    assert built == JobSpec(
        kind="k",
        key="a",
        payload={"n": 1},
        run_at=T0 + timedelta(seconds=30),
        deadline=T0 + timedelta(hours=2),
        max_attempts=3,
    ), "every builder's change survives the later ones"


@pytest.mark.parametrize("name", ["kind", "key", "payload", "run_at", "deadline", "max_attempts"])
def test_a_spec_is_frozen(name):
    """A spec handed to enqueue cannot be changed behind the caller's back."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(spec(), name, None)


# -- validate: accepted ---------------------------------------------------------


@pytest.mark.parametrize(
    "valid",
    [
        pytest.param(spec(), id="minimal"),
        pytest.param(spec(kind="k" * KIND_MAX_LENGTH), id="kind-at-its-limit"),
        pytest.param(spec(key="k" * KEY_MAX_LENGTH), id="key-at-its-limit"),
        pytest.param(spec(payload=payload_of_size(PAYLOAD_MAX_BYTES)), id="payload-at-its-limit"),
        pytest.param(
            spec(payload={"id": "ord-1", "n": 3, "f": 1.5, "ok": True, "l": [1, None], "d": {}}),
            id="payload-of-every-json-type",
        ),
        pytest.param(spec(deadline=T0), id="deadline-equal-to-run-at"),
        pytest.param(spec(deadline=T0 + timedelta(days=1)), id="deadline-after-run-at"),
        pytest.param(
            spec(run_at=datetime(2026, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))),
            id="run-at-in-another-zone",
        ),
        pytest.param(spec(max_attempts=1), id="max-attempts-one"),
        pytest.param(spec(max_attempts=1_000), id="max-attempts-large"),
        pytest.param(spec(max_attempts=MAX_ATTEMPTS_LIMIT), id="max-attempts-at-the-column-limit"),
        pytest.param(spec(run_at=datetime.min.replace(tzinfo=UTC)), id="run-at-in-year-1"),
        pytest.param(
            spec(deadline=datetime.max.replace(tzinfo=UTC)), id="deadline-at-the-end-of-year-9999"
        ),
    ],
)
def test_a_valid_spec_passes_validation(valid):
    valid.validate()  # raises InvalidJobSpec if the rule is broken


def test_encoded_payload_is_the_payload_as_json_text():
    assert json.loads(spec(payload={"a": [1, "b"]}).encoded_payload()) == {"a": [1, "b"]}, (
        "the encoded payload decodes to the payload"
    )


# -- validate: refused ----------------------------------------------------------

REFUSED = [
    pytest.param(spec(kind=""), "kind", id="empty-kind"),
    pytest.param(spec(key=""), "key", id="empty-key"),
    pytest.param(spec(kind=None), "kind", id="kind-none"),
    pytest.param(spec(kind=5), "kind", id="kind-int"),
    pytest.param(spec(key=123), "key", id="key-int"),
    pytest.param(spec(key=b"k"), "key", id="key-bytes"),
    pytest.param(spec(kind="k" * (KIND_MAX_LENGTH + 1)), "kind", id="kind-too-long"),
    pytest.param(spec(key="k" * (KEY_MAX_LENGTH + 1)), "key", id="key-too-long"),
    pytest.param(spec(payload={"tags": {"a", "b"}}), "payload", id="payload-with-a-set"),
    pytest.param(spec(payload={"when": T0}), "payload", id="payload-with-a-datetime"),
    pytest.param(spec(payload={"o": object()}), "payload", id="payload-with-an-object"),
    pytest.param(spec(payload=[1, 2]), "payload", id="payload-a-list"),
    pytest.param(spec(payload="text"), "payload", id="payload-a-string"),
    pytest.param(spec(payload=None), "payload", id="payload-none"),
    pytest.param(spec(payload={"x": float("nan")}), "payload", id="payload-with-nan"),
    pytest.param(spec(payload={"x": float("inf")}), "payload", id="payload-with-infinity"),
    pytest.param(
        spec(payload=payload_of_size(PAYLOAD_MAX_BYTES + 1)), "payload", id="payload-over-limit"
    ),
    pytest.param(spec(run_at=datetime(2026, 3, 1, 12, 0)), "run_at", id="naive-run-at"),
    pytest.param(spec(run_at="2026-03-01T12:00:00Z"), "run_at", id="run-at-a-string"),
    pytest.param(spec(run_at=None), "run_at", id="run-at-none"),
    pytest.param(spec(deadline=datetime(2026, 3, 2, 12, 0)), "deadline", id="naive-deadline"),
    pytest.param(spec(deadline=T0 - timedelta(seconds=1)), "deadline", id="deadline-before-run-at"),
    pytest.param(spec(max_attempts=0), "max_attempts", id="max-attempts-zero"),
    pytest.param(spec(max_attempts=-3), "max_attempts", id="max-attempts-negative"),
    pytest.param(spec(max_attempts=True), "max_attempts", id="max-attempts-bool"),
    pytest.param(spec(max_attempts=2.0), "max_attempts", id="max-attempts-float"),
    pytest.param(spec(max_attempts="5"), "max_attempts", id="max-attempts-string"),
    # What the table cannot hold the same on every database is refused up front:
    # PostgreSQL rejects NUL in text and \u0000 in jsonb, SQLite stores both, and a
    # database error inside the caller's atomic() would break its transaction.
    pytest.param(spec(kind="test\x00kind"), "kind", id="nul-in-kind"),
    pytest.param(spec(key="k\x00"), "key", id="nul-in-key"),
    pytest.param(spec(payload={"note": "a\x00b"}), "payload", id="nul-in-payload-string"),
    pytest.param(spec(payload={"a\x00": 1}), "payload", id="nul-in-payload-key"),
    # JSON object keys are strings: {1: "a"} would come back as {"1": "a"}, and a
    # handler reading payload[1] would fail on every attempt.
    pytest.param(spec(payload={1: "a"}), "payload", id="payload-with-an-int-key"),
    pytest.param(spec(payload={"outer": {None: 1}}), "payload", id="nested-payload-none-key"),
    # A lone surrogate is not text: PostgreSQL refuses it in text and in jsonb.
    pytest.param(spec(key="k\ud800"), "key", id="lone-surrogate-in-key"),
    pytest.param(spec(kind="test\udfffkind"), "kind", id="lone-surrogate-in-kind"),
    pytest.param(spec(payload={"note": "a\ud800"}), "payload", id="lone-surrogate-in-payload"),
    # The column is a 32-bit integer on PostgreSQL; a larger budget would fail there.
    pytest.param(spec(max_attempts=MAX_ATTEMPTS_LIMIT + 1), "max_attempts", id="max-attempts-huge"),
    # Year 1 at +05:00 is year 0 in UTC, which no datetime can hold.
    pytest.param(
        spec(run_at=datetime(1, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=5)))),
        "run_at",
        id="run-at-before-year-1-in-utc",
    ),
    pytest.param(
        spec(deadline=datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5)))),
        "deadline",
        id="deadline-after-year-9999-in-utc",
    ),
]


@pytest.mark.parametrize(("bad", "field"), REFUSED)
def test_validate_refuses_a_spec_that_can_never_be_queued_naming_the_field(bad, field):
    with pytest.raises(InvalidJobSpec) as refused:
        bad.validate()
    assert field in str(refused.value), f"the refusal names {field!r}: {refused.value}"


def test_an_invalid_spec_is_a_value_error():
    """Callers that already catch ValueError for bad input catch a bad spec too."""
    assert issubclass(InvalidJobSpec, ValueError), "InvalidJobSpec is a ValueError"


def test_the_payload_limit_is_one_mebibyte_of_json_text():
    """The limit the README and the docstring state is the one enforced."""
    assert PAYLOAD_MAX_BYTES == 1024 * 1024, "the stated limit is 1 MiB"
    assert "PAYLOAD_MAX_BYTES" in (JobSpec.__doc__ or ""), "JobSpec's docstring states it"


def test_a_non_ascii_payload_is_measured_by_its_escaped_json_text():
    """`é` is written `\\u00e9` (6 bytes), so the limit is on the text that is stored."""
    overhead = len(json.dumps({"p": ""}))
    just_over = {"p": "\u00e9" * ((PAYLOAD_MAX_BYTES - overhead) // 6 + 1)}
    with pytest.raises(InvalidJobSpec, match="limit"):
        spec(payload=just_over).validate()


# Any JSON-ish value, keys of any hashable scalar type: what a caller might pass.
_KEYS = st.one_of(st.text(max_size=5), st.integers(), st.booleans(), st.none(), st.floats())
_VALUES = st.recursive(
    st.one_of(
        st.text(max_size=5),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.booleans(),
        st.none(),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(_KEYS, inner, max_size=3),
    ),
    max_leaves=8,
)


@settings(deadline=None, derandomize=True, max_examples=300)
@given(st.dictionaries(_KEYS, _VALUES, max_size=4))
def test_validate_accepts_a_payload_exactly_when_a_json_round_trip_gives_it_back(payload):
    """The check skips decoding flat payloads again; that must never accept what
    a round trip would change (non-text keys, tuples) or refuse what it would not."""
    try:
        text = json.dumps(payload, allow_nan=False)
        json.dumps(payload, ensure_ascii=False).encode()  # no lone surrogate
        survives = json.loads(text) == payload and "\\u0000" not in text
    except (TypeError, ValueError):
        survives = False
    try:
        spec(payload=payload).validate()
        accepted = True
    except InvalidJobSpec:
        accepted = False
    assert accepted == survives, f"{payload!r}: accepted {accepted}, round trip {survives}"


def test_under_use_tz_false_a_spec_takes_naive_wall_times_and_refuses_aware_ones(
    settings: Any,
) -> None:
    """Django keeps naive wall times in `TIME_ZONE` then (its SQLite and MySQL
    backends refuse an aware one), so the spec's own default must pass."""
    settings.USE_TZ = False
    JobSpec.now("test.kind", "k").validate()
    spec(run_at=datetime(2026, 3, 1, 12, 0)).validate()
    with pytest.raises(InvalidJobSpec, match="run_at must be naive"):
        spec(run_at=datetime(2026, 3, 1, 12, 0, tzinfo=UTC)).validate()
