"""The test settings of a project that configured no LOGGING, as `startproject` makes
one: for real processes whose rule is about what is heard without it."""

from tests.settings import *  # noqa: F403

del LOGGING  # noqa: F821 - star-imported from acmeproxy.settings, through tests.settings
