"""The channels' durable book: which session each (channel, thread) belongs to for ever, every message taken in
(with its status: started, replied, acknowledged), the tasks the action-required gate created, and which worker
drives a thread now. In the home's own SQLite file (`<home>/channels.db`, its own recorded migrations, so the event
store's schema is untouched), or, when the store is PostgreSQL, in that database, shared by every daemon on it."""

from memory.channel_book._book import BOOK_FILE, ChannelBook, IntakeRow, IntakeStatus, TaskRow, ThreadRow

__all__ = ["BOOK_FILE", "ChannelBook", "IntakeRow", "IntakeStatus", "TaskRow", "ThreadRow"]
