"""End-to-end tests in a real browser: Debian's Chromium driven by Playwright against
pytest-django's live server. They skip, saying why, where Chromium is missing."""
