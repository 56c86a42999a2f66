"""The database: entities, engines, sessions, fast reads, change stamps, migrations."""
