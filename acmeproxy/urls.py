"""URL routes: the admin, where operators browse and act on jobs, and the example
orders API, which queues its work as jobs."""

from django.contrib import admin
from django.urls import include, path

from acmeproxy.orders import views as orders

urlpatterns = [
    path("admin/", admin.site.urls),
    path("orders", orders.create),  # the collection without its slash, for POST too
    path("orders/", include("acmeproxy.orders.urls")),
]
