"""URL routes: the admin, where operators browse and act on jobs, and the example
orders API, which queues its work as jobs."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("orders/", include("acmeproxy.orders.urls")),
]
