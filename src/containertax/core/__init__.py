"""The ground floor: what every layer shares and that needs no other part of containertax.

Generic storage (records: atomic writes, JSON, locks, the ledger), the cell value type
(cell), a measured value (metric) and the typed raw record (rawrecord). Nothing here
imports any other containertax package (tests/test_architecture.py holds it to that).
"""
