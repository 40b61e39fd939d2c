"""acmeproxy: the Django project that hosts the `jobs` queue and its examples."""
