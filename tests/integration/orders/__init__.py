"""The orders example (`acmeproxy.orders`) in this process: its API, the relay handler
and the upstream client. End to end, with `runjobs`, it is tests/acceptance."""
