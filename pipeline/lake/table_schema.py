"""Schema plumbing between Spark, Arrow and Delta, and the checks before files join a table."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pyarrow as pa
from deltalake import Field as DeltaField
from deltalake import Schema as DeltaSchema

from pipeline.errors import StompLakeError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


class SchemaMismatch(ValueError, StompLakeError):
    """The batch's schema cannot be appended to the table as it stands."""

    exit_code = 1


SPARK_METADATA_KEY = b"SPARK::metadata::json"


def to_arrow_schema(schema: StructType | pa.Schema) -> pa.Schema:
    if isinstance(schema, pa.Schema):
        return schema
    from pyspark.sql.pandas.types import to_arrow_schema as spark_to_arrow

    # Spark's TimestampType is an instant: Delta's `timestamp`, Arrow's timestamp[us, UTC].
    return with_plain_metadata(spark_to_arrow(schema, timezone="UTC"))


def with_plain_metadata(schema: pa.Schema) -> pa.Schema:
    """Spark's column metadata as plain field metadata. PySpark packs a StructField's metadata
    into one JSON value under `SPARK::metadata::json`; Delta's schema keeps field metadata as
    it finds it, and other engines (delta-rs, Polars, DuckDB, Spark's DESCRIBE) read a column's
    description from the standard `comment` key only."""
    fields = []
    for field in schema:
        metadata = dict(field.metadata or {})
        packed = metadata.pop(SPARK_METADATA_KEY, None)
        if packed is not None:
            for key, value in json.loads(packed).items():
                metadata[key.encode()] = value if isinstance(value, str) else json.dumps(value)
        fields.append(field.with_metadata(metadata) if metadata else field.remove_metadata())
    return pa.schema(fields, metadata=schema.metadata)


def to_spark_schema(schema: StructType | pa.Schema) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructType

    if isinstance(schema, StructType):
        return schema
    return from_arrow_schema(schema, prefer_timestamp_ntz=True)


def delta_schema_to_arrow(schema: DeltaSchema) -> pa.Schema:
    return pa.schema(schema.to_arrow())


def check_partition_columns(schema: pa.Schema, partition_by: list[str]) -> None:
    missing = [name for name in partition_by if name not in schema.names]
    if missing:
        raise SchemaMismatch(f"partition columns {missing} are not in the schema {schema.names}")
    if len(partition_by) == len(schema.names):
        raise SchemaMismatch("every column is a partition column: no data would be stored")


def added_fields(existing: DeltaSchema, wanted: pa.Schema) -> list[DeltaField]:
    """Columns `wanted` adds to `existing`; SchemaMismatch when it drops or retypes one."""
    old = {f.name: f for f in existing.fields}
    new = DeltaSchema.from_arrow(wanted).fields
    new_names = {f.name for f in new}
    problems = [f"column {name!r} is missing" for name in old if name not in new_names]
    for field in new:
        if field.name in old and _type_json(old[field.name]) != _type_json(field):
            problems.append(
                f"column {field.name!r} is {_type_json(old[field.name])} in the table "
                f"but {_type_json(field)} in the batch"
            )
    added = [f for f in new if f.name not in old]
    problems += [f"new column {f.name!r} must be nullable" for f in added if not f.nullable]
    if problems:
        raise SchemaMismatch("batch schema does not fit the table: " + "; ".join(problems))
    return added


def _type_json(field: DeltaField) -> str:
    return json.dumps(json.loads(field.to_json())["type"], sort_keys=True)
