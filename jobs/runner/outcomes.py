"""What an attempt's `run` ended with, made an outcome its settle can store.

The one place a handler's end is checked before the completer settles it
(`Executor.run` calls `checked` on whatever `run` returned, `raised` on
whatever it raised). A settle must never fail for one job's sake: a `Done`
waits in a batch whose rows go to the database in one statement, so one
result the database refuses would fail every `Done` of the batch, and a
reason that is not text, or holds a NUL, crashed its settle and left the row
running until its lease ran out. So:

- a `Done` whose result no supported database stores (`jobs.storable`: not
  JSON, too large, too deep, a NUL or a lone surrogate) is the job's own
  `Failed`, saying what was wrong. Not a `Retry`: the same run returns the
  same result, and running it again would repeat work already done;
- a `Reschedule` whose delay is not a positive timedelta is the job's
  `Failed` likewise (a delay of zero or less ran the job again at once, for
  ever);
- a `Retry` or `Failed` reason of any type is kept as text (None as a
  sentence saying none was given), and every text a settle writes from the
  handler (a reason, a traceback) has its NULs and lone surrogates escaped;
- anything that is not an outcome stays a `Retry` saying what came back.

The hot path pays for a type check: a `Done()` is returned as it is, and a
result is checked with one JSON encoding and a walk of its containers.
"""

from __future__ import annotations

import reprlib
import traceback
from datetime import timedelta

from jobs import history
from jobs.handlers import RESULT_MAX_BYTES, Done, Failed, JobHandler, Outcome, Reschedule, Retry
from jobs.storable import Unstorable, json_text, storable_text

#: How much of a value the reasons below quote: enough to recognise it, never
#: a row's worth of whatever a handler returned.
_QUOTE = reprlib.Repr(maxstring=200, maxother=200, maxlist=10, maxdict=10, maxlevel=3)


def checked(handler: JobHandler, returned: object) -> Outcome:
    """`returned`, what `handler.run` returned, as the outcome to settle."""
    if isinstance(returned, Done):
        if returned.result is None:
            return returned  # the usual `Done()`: nothing to check
        try:
            json_text(returned.result, "result", RESULT_MAX_BYTES)
        except Unstorable as problem:
            return _refused(f"{type(handler).__name__}.run returned a Done whose {problem}")
        return returned
    name = type(handler).__name__
    if isinstance(returned, (Retry, Failed)):
        return _as_text(name, returned)
    if isinstance(returned, Reschedule):
        delay = returned.delay
        if not isinstance(delay, timedelta):
            return _refused(
                f"{name}.run returned Reschedule({_quote(delay)}), whose delay is not a timedelta"
            )
        if delay <= timedelta(0):
            return _refused(
                f"{name}.run returned Reschedule({_quote(delay)}): a reschedule's delay must be "
                "positive (one of zero or less would run the job again at once, for ever)"
            )
        return returned
    return Retry(
        storable_text(
            f"{name}.run returned {_quote(returned)}, not Done, Retry, Failed or Reschedule"
        )
    )


def raised(error: BaseException) -> Retry:
    """The `Retry` for an attempt whose `run` raised `error`: its traceback as
    the reason, made storable (an exception's message may hold anything)."""
    text = "".join(traceback.format_exception(error))
    return Retry(storable_text(text), exception=error)


def _as_text(name: str, outcome: Retry | Failed) -> Retry | Failed:
    """`outcome` with its reason as storable text and its `exception` only if
    it is one; `outcome` itself when both already are (the usual case)."""
    reason, exception = outcome.reason, outcome.exception
    if reason is None:
        text = f"{name}.run returned {type(outcome).__name__} without a reason"
    elif isinstance(reason, str):
        text = reason
    else:
        try:
            text = str(reason)
        except Exception:  # a __str__ that raises: its type still says something
            text = f"a {type(reason).__name__} whose str() raised"
    text = storable_text(text)
    if not isinstance(exception, BaseException):
        exception = None
    if text is reason and exception is outcome.exception:
        return outcome
    if isinstance(outcome, Retry):
        return Retry(text, exception=exception)
    return Failed(text, exception=exception)


def _refused(reason: str) -> Failed:
    """The job's own `Failed` for an outcome the runner cannot carry out."""
    reason = storable_text(reason)
    return Failed(reason, exception=history.OutcomeRefused(reason))


def _quote(value: object) -> str:
    """A short repr of `value`, or its type's name when its repr raises."""
    try:
        return _QUOTE.repr(value)
    except Exception:
        return f"<{type(value).__name__}>"
