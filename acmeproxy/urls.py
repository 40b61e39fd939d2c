"""URL routes: the admin, where operators browse and act on jobs, the queue's
gauges for Prometheus (behind a token or the jobs.view_job permission), and
the example orders API, which queues its work as jobs. The error handlers answer the API's
paths in JSON and the rest of the site with Django's pages."""

from django.contrib import admin
from django.urls import include, path

from acmeproxy.orders import views as orders
from jobs.metrics.views import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("metrics/jobs", metrics),
    path("orders", orders.create),  # the collection without its slash, for POST too
    path("orders/", include("acmeproxy.orders.urls")),
]

handler400 = orders.bad_request
handler500 = orders.server_error
