"""Spark jobs of the project: precomputed stream datasets and analytics over run logs (PySpark, local[*] or a
cluster given with --master)."""
