"""Parses Prometheus text exposition from stdin with prometheus_client's parser (an
independent implementation of the format) and prints every sample as JSON:
[{"name": ..., "labels": {...}, "value": ...}, ...]."""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

samples = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        samples.append({"name": s.name, "labels": s.labels, "value": s.value, "type": family.type})
print(json.dumps(samples))
