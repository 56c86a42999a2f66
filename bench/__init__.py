"""Benchmarks of jobpost against PostgreSQL, run by `make bench` (`python -m bench`).

Each bench measures its scenarios and a baseline in the same run and prints ratios to it, so the
numbers compare across machines. `bench/__main__.py` lists the benches; `python -m bench api`
runs one of them.
"""
