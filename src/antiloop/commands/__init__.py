"""The work behind each ``antiloop`` subcommand, one module each."""
