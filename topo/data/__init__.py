"""Data in: synthetic streams, stream specs, Zipf keys and stored datasets."""
