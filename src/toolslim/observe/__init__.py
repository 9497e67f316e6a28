"""The observers: the ledger of exchanges, stats and its counters, drift, advice, the fleet
across workers, metrics, logs, capture and the dashboard's files."""
