"""The worker tests use the shared fixtures of tests/conftest.py (`smtp_sink`, `unused_port`)."""
