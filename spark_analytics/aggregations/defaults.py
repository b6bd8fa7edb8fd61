"""The defaults of the settings the command line can change (`aggregations.Options`), which the table functions
also default to: a function called without them computes what the report would.

The alert thresholds the report applies (lag SLO, transaction grace) are the collector's: the report reads them
from the history (``cluster.thresholds``, `aggregations.thresholds`); when the history has none (version 1) it
falls back to the collector's own defaults, taken from `collectors.alerting.thresholds.Thresholds` itself, so
there is one number for each, not one in the collector and another in the report.
"""

from collectors.alerting.thresholds import Thresholds

COLLECTOR_DEFAULTS = Thresholds()
"""The thresholds a collector runs with when its configuration sets none."""

DEFAULT_LAG_SLO_S = float(COLLECTOR_DEFAULTS.lag_seconds_slo)
DEFAULT_TXN_GRACE_S = float(COLLECTOR_DEFAULTS.txn_timeout_grace_s)
DEFAULT_ACCURACY = 10_000  # percentile_approx's accuracy with --approx-percentiles
