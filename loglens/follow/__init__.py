"""Live mode: follow a growing server log into the store (`loglens tail`).

follower.py  the step function: rotation, copytruncate, a file that does not exist yet
loop.py      when to step: watchdog events on the log's directory, a slow poll
compact.py   merges the small files live reads leave, crash-safe (journal, replayed on start)
window.py    the recent rows of the followed log, refreshed from new store files
status.py    the live status, a pure function of those rows
view.py      the rich live view of a status
session.py   all of it together: what `loglens tail` calls
"""
