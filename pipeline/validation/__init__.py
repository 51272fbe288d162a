"""The validation gate: Great Expectations suites run on each batch before it is committed."""
