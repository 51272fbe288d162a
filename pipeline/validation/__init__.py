"""The validation gate: Great Expectations suites run on each batch before it is committed."""

# Where the validation suites run (`pipeline.runner.validates_on_duckdb`): DuckDB in the driver,
# over the batch's files (`pipeline.validation.local_sql`), Spark, or auto (DuckDB with a local
# master).
VALIDATION_ENGINES = ("auto", "duckdb", "spark")
