# Collector image (the dashboard runs from the same image with another command).
FROM python:3.11-slim
RUN useradd --create-home --uid 10001 monitor
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY collectors/ collectors/
COPY dashboard/ dashboard/
COPY sandbox/ sandbox/
USER monitor
EXPOSE 9308
CMD ["python", "-m", "collectors", "--config", "/etc/kafka-monitor/config.yaml"]
