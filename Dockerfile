# syntax=docker/dockerfile:1
# Images of the Kafka reliability monitor: ONE Dockerfile, three images as multi-stage targets.
#   docker build -t kafka-reliability-monitor .                                          # collector (default)
#   docker build -t kafka-reliability-monitor-dashboard --target dashboard .            # Streamlit dashboard
#   docker build -t kafka-reliability-monitor-spark --target spark .                    # weekly Spark report
#
# collector  the core dependencies of pyproject.toml (no pyspark, streamlit, plotly or pandas) and collectors/ only;
#            HEALTHCHECK on /healthz (cheap, never renders /metrics).
# dashboard  the wheel with the `dashboard` extra (streamlit, plotly, pandas); `kafka-monitor-dashboard`.
# spark      the wheel with the `report` extra (pyspark, plotly, pandas) and Java 17; `kafka-monitor-report` (the
#            entrypoint) and `kafka-monitor-rollup` (the daily roll-ups).
#
# Every image runs as the non-root user `monitor` (uid 10001) and keeps its data under the /data volume. The
# collector listens on 0.0.0.0:9308 inside the container only because the config mounted at
# /etc/kafka-monitor/config.yaml says so (exporter.host); the default is 127.0.0.1. The versions installed are
# pyproject.toml's pins, which tests/unit/test_repository.py keeps equal to requirements.txt.

FROM python:3.11.11-slim-bookworm AS python
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --create-home --uid 10001 monitor && mkdir -p /data && chown monitor /data
VOLUME ["/data"]

# The wheel (every package, console scripts, data files) and the collector's requirement set, both from pyproject.toml.
FROM python AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY collectors/ collectors/
COPY dashboard/ dashboard/
COPY spark_analytics/ spark_analytics/
COPY sandbox/ sandbox/
RUN pip wheel --no-deps -w /dist . \
    && python -c "import tomllib; deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; \
open('/dist/core.txt', 'w').write(''.join(d + '\n' for d in deps))"

FROM python AS dashboard
COPY --from=build /dist/*.whl /tmp/wheel/
RUN pip install "$(ls /tmp/wheel/kafka_reliability_monitor-*.whl)[dashboard]" && rm -rf /tmp/wheel
USER monitor
WORKDIR /home/monitor
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)" || exit 1
# binds 0.0.0.0 inside the container; publish it on 127.0.0.1 (deploy/docker-compose.yml) or behind a proxy
ENTRYPOINT ["kafka-monitor-dashboard", "--address", "0.0.0.0", "--port", "8501"]
CMD ["--state-dir", "/data/state", "--history", "/data/history", "--reports", "/data/reports"]

FROM python AS spark
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /dist/*.whl /tmp/wheel/
RUN pip install "$(ls /tmp/wheel/kafka_reliability_monitor-*.whl)[report]" && rm -rf /tmp/wheel
USER monitor
WORKDIR /home/monitor
# The driver JVM's class-data sharing archive, on the volume: the first report or roll-up writes it (~190 MB), later
# runs start ~2 s faster; a new image (another JVM or Spark) makes it stale and the next run writes it again.
ENV SPARK_LOCAL_IP=127.0.0.1 KMON_CLASS_ARCHIVE=/data/cache/spark-classes.jsa
ENTRYPOINT ["kafka-monitor-report"]
CMD ["--history", "/data/history", "--out", "/data/reports"]

# Last, so that it is the default target.
FROM python AS collector
COPY --from=build /dist/core.txt /tmp/core.txt
RUN pip install -r /tmp/core.txt && rm /tmp/core.txt
WORKDIR /app
COPY collectors/ collectors/
ENV PYTHONPATH=/app
USER monitor
# The defaults state_dir "data/state" and history.root "data/history" are relative: from / they are on the volume
# (/data, the monitor's); from /app (root's) a config that leaves them out could write neither.
WORKDIR /
EXPOSE 9308
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9308/healthz', timeout=4)" || exit 1
CMD ["python", "-m", "collectors", "--config", "/etc/kafka-monitor/config.yaml"]
