"""Reading prometheus_client's default registry the way a scrape would.

The registry lives as long as the test process, so a test reads what a
change added: `Reading` takes every sample before, and `added` the
difference after.
"""

from __future__ import annotations

from prometheus_client import REGISTRY


def sample(name: str, **labels: str) -> float:
    """A sample's value in the default registry (0 when it was never recorded)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


Labels = tuple[tuple[str, str], ...]
Changes = dict[tuple[str, Labels], float]


class Reading:
    """The default registry's samples of the jobs metrics, as they were when made."""

    def __init__(self) -> None:
        self.before = _jobs_samples()

    def added(self) -> Changes:
        """Each sample that changed since, by how much (name, sorted labels)."""
        after = _jobs_samples()
        return {
            key: value - self.before.get(key, 0.0)
            for key, value in after.items()
            if value != self.before.get(key, 0.0)
        }


def _jobs_samples() -> Changes:
    samples = {}
    for family in REGISTRY.collect():
        if not family.name.startswith("jobs_"):
            continue
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            samples[s.name, tuple(sorted(s.labels.items()))] = s.value
    return samples


def counted(added: Changes, name: str) -> dict[Labels, float]:
    """The changes of one metric's samples, by their labels."""
    return {labels: value for (sample_name, labels), value in added.items() if sample_name == name}


def labels(**values: str) -> Labels:
    return tuple(sorted(values.items()))
