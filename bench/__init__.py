"""plmbench's command line, run orchestration, run records, leaderboards and perf benchmark."""
