"""The live config (`jobs.config`, the `JobsConfig` row): its admin form, and how a
change reaches a running runner."""
