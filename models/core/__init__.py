"""What every layer shares: settings, logs, dates, errors, field checks, languages."""
