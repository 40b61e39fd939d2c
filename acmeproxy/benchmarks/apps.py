from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    name = "acmeproxy.benchmarks"
    label = "benchmarks"
    verbose_name = "Benchmarks"
