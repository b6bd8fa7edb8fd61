# syntax=docker/dockerfile:1
# Images of the Kafka reliability monitor.
#   docker build -t kafka-reliability-monitor .                      # collector (+ dashboard)
#   docker build -t kafka-reliability-monitor-spark --target spark .  # weekly Spark report (Java inside)
# The collector runs as a non-root user, listens on 0.0.0.0:9308 inside the container only because
# the config mounted at /etc/kafka-monitor/config.yaml says so (exporter.host); the default is 127.0.0.1.

FROM python:3.11-slim-bookworm AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN useradd --create-home --uid 10001 monitor
WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt
COPY collectors/ collectors/
COPY dashboard/ dashboard/
COPY spark_analytics/ spark_analytics/
COPY sandbox/ sandbox/
RUN mkdir -p /data && chown monitor /data
USER monitor
VOLUME ["/data"]

FROM base AS collector
EXPOSE 9308
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD python -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:9308/metrics', timeout=4)" || exit 1
# The dashboard from the same image: docker run ... kafka-reliability-monitor \
#   streamlit run dashboard/app.py --server.address 0.0.0.0 -- --state-dir /data/state --history /data/history
CMD ["python", "-m", "collectors", "--config", "/etc/kafka-monitor/config.yaml"]

FROM base AS spark
USER root
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
USER monitor
ENV SPARK_LOCAL_IP=127.0.0.1
ENTRYPOINT ["python", "-m", "spark_analytics.weekly_report"]
CMD ["--history", "/data/history", "--out", "/data/reports"]

# Default target: the collector.
FROM collector
