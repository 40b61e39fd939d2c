"""orders: the example app, and the reason the `jobs` queue exists.

A client creates an order, finalizes it, and is answered `processing` at once;
the certificate comes from an upstream CA in the background (the `orders.relay`
job, `jobs.py`), and the client polls the order until it is `valid` or
`invalid`. The upstream is a network away, so it blips: a 503, a dropped
connection, a timeout. Before the queue, every such failure was terminal and
the client had to place the order again. Now a blip is a `Retry` the client
never sees (it keeps polling `processing`), and only a stated refusal or an
exhausted budget ends the order `invalid`, once, through `abandon`.
"""
