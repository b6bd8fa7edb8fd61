"""Weekly reliability report: PySpark aggregations over the collected history."""

import warnings

# PySpark 4.3 warns at import (pyspark.testing.utils, which pyspark.sql imports) that it "does not yet fully support
# pandas >= 3.0.0". The versions are pinned together in requirements.txt and every figure of the report is tested
# against DuckDB with them (the suite, bench.check_report), so the warning told on-call, on every weekly job, only
# that a library had not caught up. This filter drops that one message; any other warning still shows.
warnings.filterwarnings("ignore", message=r"PySpark does not yet fully support pandas", category=FutureWarning)
