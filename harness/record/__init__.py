"""The record: the protocol's one model of a log's order, the hash-chained log, the ledger
that writes it, exchanges, write tokens, the envelope sent to a worker and the commit of the
record."""
