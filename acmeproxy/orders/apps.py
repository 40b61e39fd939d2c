"""`OrdersConfig`: the example app. Its relay handler lives in `jobs.py`, which the
`jobs` app imports at start-up like `admin.py`."""

from django.apps import AppConfig


class OrdersConfig(AppConfig):
    name = "acmeproxy.orders"
    label = "orders"
    verbose_name = "Orders"
    default_auto_field = "django.db.models.BigAutoField"
