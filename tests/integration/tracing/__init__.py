"""`jobs.tracing` with OpenTelemetry's SDK installed: what an enqueue stores on its
row, and the span each attempt runs in. The tests that start a real `runjobs`
process, or one without OpenTelemetry, are tests/acceptance/test_tracing_process.py."""
