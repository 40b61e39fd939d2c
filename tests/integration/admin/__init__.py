"""The admin (`jobs.admin`), driven through Django's test client as a browser would."""
