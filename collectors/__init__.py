"""Collectors: poll Kafka, ZooKeeper and KRaft into snapshot records, evaluate alert rules."""
