"""The channels' durable book (`<home>/channels.db`): which session each (channel, thread) belongs to for ever,
every message taken in (with its status: started, replied, acknowledged) and the tasks the action-required gate
created. Its own SQLite file with its own ordered, recorded migrations, so the event store's schema is untouched."""

from memory.channel_book._book import BOOK_FILE, ChannelBook, IntakeRow, IntakeStatus, TaskRow, ThreadRow

__all__ = ["BOOK_FILE", "ChannelBook", "IntakeRow", "IntakeStatus", "TaskRow", "ThreadRow"]
