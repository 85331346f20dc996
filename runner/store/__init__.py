"""The results database: its schema (``schema``), the single writer (``db``), parquet
export (``export``) and merge (``merge``)."""
