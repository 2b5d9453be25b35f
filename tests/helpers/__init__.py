"""What several test files share: small data builders, the command runner, logged runs."""
