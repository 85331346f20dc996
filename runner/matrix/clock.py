"""UTC time, the one way every part of the runner stamps it."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now_iso() -> str:
    """Now in UTC, ISO 8601 to the millisecond (the text stamps of a result)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def utc_now() -> datetime:
    """Now in UTC as a naive datetime: DuckDB TIMESTAMP columns hold naive UTC."""
    return datetime.now(UTC).replace(tzinfo=None)


def utc_naive(moment: datetime | None) -> datetime | None:
    """``moment`` as naive UTC (an aware datetime would be shifted to local time)."""
    if moment is None or moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)
