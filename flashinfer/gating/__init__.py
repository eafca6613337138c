"""The experimental gate and what it rests on: warn-once, the messages, the records and the
markers, one job per module.  Public names are imported from ``flashinfer.api_logging``."""
