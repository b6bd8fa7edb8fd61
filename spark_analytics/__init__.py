"""Weekly reliability report: PySpark aggregations over the collected history."""
