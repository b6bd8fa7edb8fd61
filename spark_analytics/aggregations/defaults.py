"""The defaults of the settings the command line can change (`aggregations.Options`), which the table functions
also default to: a function called without them computes what the report would."""

DEFAULT_LAG_SLO_S = 300.0
DEFAULT_TXN_GRACE_S = 10.0  # Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms
DEFAULT_ACCURACY = 10_000  # percentile_approx's accuracy with --approx-percentiles
