"""Jobs (C4 to C6, C10, C13): writes, rows, rules, listing, feeds, upkeep, events."""
