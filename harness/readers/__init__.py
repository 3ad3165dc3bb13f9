"""The readers of a record: audit, replay, report, attest, log and status."""
