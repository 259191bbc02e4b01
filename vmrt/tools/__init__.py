"""The `vmrt` command line: one module per subcommand, dispatched by cli.py."""
