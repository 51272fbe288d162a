"""The `stomp-lake` subcommands: argument handling and I/O around the Spark jobs."""
