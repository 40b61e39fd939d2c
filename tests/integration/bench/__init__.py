"""The benchmark's raw baselines (`acmeproxy.benchmarks`), on the test database."""
