"""The relay: fetch a finalized order's certificate from the upstream, in the background.

One job per order (kind `orders.relay`, key the order id) carries it from
`processing` to a terminal answer. The handler follows the queue's three
rules:

1. `run` starts from scratch every time: it re-reads the order, and an order
   no longer `processing` gets no upstream call. A `valid` one is finished
   business (`Done`). An `invalid` one stays invalid: its client has been
   told so and told to place a new order, so a relay retried by an operator
   after the order was abandoned is refused (`Failed`, saying why) rather
   than re-opening it, which could issue a certificate to a client that has
   stopped polling, or a second one to a client that ordered again.
2. The upstream's answers are sorted once (`upstream.py`): anything that may
   pass is a `Retry`, a stated refusal is `Failed`.
3. The client hears a failure only from `abandon`, once, when the job is
   retired; through every retry it keeps reading `processing`. It reads the
   reason's one line, in plain words: exceptions, their reprs and tracebacks
   stay in the job's history (`for_client`).

Both writes are conditional on the order still being `processing`: an attempt
that overran its lease and answers late can never overwrite the order's
terminal state.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from acmeproxy.orders import upstream
from acmeproxy.orders.models import Order, State
from jobs import Done, Failed, JobHandler, JobSpec, Retry, enqueue_or_log, register
from jobs.models import Job
from jobs.presentation import telling_line

KIND = "orders.relay"

#: Added to the upstream timeout for the attempt's budget: time to read and
#: write the order around the request.
LEASE_MARGIN = timedelta(seconds=5)


def relay(order_id: int) -> JobSpec:
    """The job that carries order `order_id` to a terminal state."""
    return JobSpec.now(KIND, str(order_id)).with_payload({"order_id": order_id})


#: What the client reads when the relay itself broke (an exception escaped `run`).
RELAY_BROKE = "the relay failed on the server; place a new order"


def for_client(reason: str) -> str:
    """What the order's client reads of the queue's `reason`: its first line
    (the upstream's refusal, or "gave up after 3 of 3 attempts: upstream
    unreachable: Connection refused"). A traceback is the server's business:
    the client reads only that the relay broke, the job's history keeps it."""
    if "Traceback (most recent call last)" in reason:
        return RELAY_BROKE
    return telling_line(reason)


@register
class RelayHandler(JobHandler):
    kind = KIND

    def budget(self) -> timedelta:
        # The upstream request is bounded in total by its timeout, so an
        # attempt always ends before its lease, and no second attempt (hence
        # no second request for this order) can start while one is in flight.
        return timedelta(seconds=upstream.timeout()) + LEASE_MARGIN

    def run(self, job: Job) -> Done | Retry | Failed:
        order_id = job.payload.get("order_id")
        if not isinstance(order_id, int) or isinstance(order_id, bool):
            return Failed(f"the payload names no order: {job.payload!r}")
        order = Order.objects.filter(pk=order_id).first()
        if order is None:
            return Failed(f"order {order_id} does not exist")
        if order.state == State.INVALID:
            # Retried after its order was abandoned: see the module docstring.
            return Failed(
                f"order {order_id} is invalid and stays so (its client was answered: "
                f"{order.reason}); a new order, not a retried relay, asks again"
            )
        if order.state != State.PROCESSING:
            # Already answered (an earlier attempt stored the certificate), or
            # never finalized: nothing to ask the upstream.
            return Done()
        answer = upstream.request_certificate(order_id)
        if isinstance(answer, upstream.Unavailable):
            # The plain reason first (the line every display shows, and what
            # the client may read), the exception's repr below it for the history.
            detail = f"{answer.reason}\n{answer.detail}" if answer.detail else answer.reason
            return Retry(detail, exception=answer.error)
        if isinstance(answer, upstream.Refused):
            # The upstream's words, as they are: they are what the client reads.
            return Failed(answer.reason)
        Order.objects.filter(pk=order_id, state=State.PROCESSING).update(
            state=State.VALID, certificate=answer.certificate, updated_at=timezone.now()
        )
        return Done()

    def abandon(self, job: Job, reason: str) -> None:
        """The order's one terminal failure: `invalid`, with the reason the client reads."""
        order_id = job.payload.get("order_id")
        if not isinstance(order_id, int) or isinstance(order_id, bool):
            return
        Order.objects.filter(pk=order_id, state=State.PROCESSING).update(
            state=State.INVALID, reason=for_client(reason), updated_at=timezone.now()
        )

    def recover(self) -> None:
        """Queue a relay for every order a previous process left `processing`.

        One whose relay is still live is refused as a duplicate, so this only
        restores the ones whose job was lost.
        """
        processing = Order.objects.filter(state=State.PROCESSING).order_by("id")
        for order_id in processing.values_list("id", flat=True).iterator():
            enqueue_or_log(relay(order_id))
