"""Schema plumbing without Spark running: PySpark's type objects are plain Python, Delta's schema
comes from delta-rs."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import Schema as DeltaSchema

from pipeline.errors import StompLakeError
from pipeline.lake.table_schema import (
    SPARK_METADATA_KEY,
    SchemaMismatch,
    added_fields,
    check_partition_columns,
    delta_schema_to_arrow,
    to_arrow_schema,
    to_spark_schema,
    with_plain_metadata,
)

TABLE = pa.schema(
    [
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("session", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("date", pa.date32()),
    ]
)


def _spark_packed(**metadata: object) -> dict[bytes, bytes]:
    return {SPARK_METADATA_KEY: json.dumps(metadata).encode()}


# --- metadata ------------------------------------------------------------------------------------


def test_spark_s_packed_metadata_becomes_plain_keys() -> None:
    schema = pa.schema(
        [pa.field("seq", pa.int64(), metadata=_spark_packed(comment="frame number", n=3))]
    )
    [field] = with_plain_metadata(schema)
    assert field.metadata == {b"comment": b"frame number", b"n": b"3"}


def test_a_non_string_value_is_kept_as_json() -> None:
    schema = pa.schema([pa.field("x", pa.int64(), metadata=_spark_packed(tags=["a", "b"]))])
    [field] = with_plain_metadata(schema)
    assert json.loads(field.metadata[b"tags"]) == ["a", "b"]


def test_other_field_metadata_stays_beside_the_unpacked_keys() -> None:
    metadata = {b"origin": b"capture", **_spark_packed(comment="c")}
    [field] = with_plain_metadata(pa.schema([pa.field("x", pa.int64(), metadata=metadata)]))
    assert field.metadata == {b"origin": b"capture", b"comment": b"c"}


def test_an_empty_pack_leaves_a_field_without_metadata() -> None:
    schema = pa.schema([pa.field("x", pa.int64(), metadata=_spark_packed())])
    [field] = with_plain_metadata(schema)
    assert field.metadata is None


def test_names_types_nullability_and_schema_metadata_are_untouched() -> None:
    schema = TABLE.with_metadata({b"table": b"frames"})
    plain = with_plain_metadata(schema)
    assert plain.equals(schema, check_metadata=True)


def test_an_arrow_schema_is_its_own_arrow_schema() -> None:
    assert to_arrow_schema(TABLE) is TABLE


def test_a_spark_schema_becomes_arrow_with_utc_instants_and_plain_comments() -> None:
    from pyspark.sql.types import LongType, StructField, StructType, TimestampType

    spark = StructType(
        [
            StructField("ts", TimestampType(), False, {"comment": "capture time"}),
            StructField("seq", LongType(), True),
        ]
    )
    arrow = to_arrow_schema(spark)
    assert arrow.field("ts").type == pa.timestamp("us", tz="UTC")
    assert not arrow.field("ts").nullable and arrow.field("seq").nullable
    assert arrow.field("ts").metadata == {b"comment": b"capture time"}
    assert arrow.field("seq").metadata is None


def test_to_spark_schema_keeps_a_spark_schema_and_reads_naive_timestamps_as_ntz() -> None:
    from pyspark.sql.types import StructType, TimestampNTZType, TimestampType

    spark = to_spark_schema(
        pa.schema([pa.field("local", pa.timestamp("us")), pa.field("utc", TABLE.field("ts").type)])
    )
    assert isinstance(spark, StructType)
    assert [f.dataType for f in spark.fields] == [TimestampNTZType(), TimestampType()]
    assert to_spark_schema(spark) is spark


def test_a_delta_schema_reads_back_as_the_arrow_schema_it_came_from() -> None:
    assert delta_schema_to_arrow(DeltaSchema.from_arrow(TABLE)).equals(TABLE)


# --- partition columns ---------------------------------------------------------------------------


@pytest.mark.parametrize("partition_by", [[], ["date"], ["date", "session"]])
def test_partition_columns_of_the_schema_pass(partition_by: list[str]) -> None:
    check_partition_columns(TABLE, partition_by)


def test_a_partition_column_not_in_the_schema_is_named() -> None:
    with pytest.raises(SchemaMismatch, match=r"partition columns \['day'\] are not in the schema"):
        check_partition_columns(TABLE, ["date", "day"])


def test_partitioning_by_every_column_is_refused() -> None:
    with pytest.raises(SchemaMismatch, match="every column is a partition column"):
        check_partition_columns(TABLE, TABLE.names)


# --- evolution -----------------------------------------------------------------------------------


def test_the_same_schema_adds_nothing() -> None:
    assert added_fields(DeltaSchema.from_arrow(TABLE), TABLE) == []


def test_new_nullable_columns_are_returned_in_the_batch_s_order() -> None:
    wanted = TABLE.append(pa.field("body", pa.binary())).append(pa.field("n", pa.int32()))
    added = added_fields(DeltaSchema.from_arrow(TABLE), wanted)
    assert [(f.name, f.nullable) for f in added] == [("body", True), ("n", True)]


def test_column_order_alone_is_no_change() -> None:
    reordered = pa.schema([TABLE.field(name) for name in reversed(TABLE.names)])
    assert added_fields(DeltaSchema.from_arrow(TABLE), reordered) == []


def test_a_new_column_that_may_not_be_null_is_refused() -> None:
    wanted = TABLE.append(pa.field("required", pa.int64(), nullable=False))
    with pytest.raises(SchemaMismatch, match="new column 'required' must be nullable"):
        added_fields(DeltaSchema.from_arrow(TABLE), wanted)


def test_every_problem_is_told_in_one_message() -> None:
    wanted = pa.schema(
        [
            TABLE.field("ts"),
            pa.field("session", pa.int64()),  # retyped
            pa.field("date", pa.date32()),  # seq dropped
            pa.field("extra", pa.string(), nullable=False),
        ]
    )
    with pytest.raises(SchemaMismatch) as refused:
        added_fields(DeltaSchema.from_arrow(TABLE), wanted)
    assert str(refused.value) == (
        "batch schema does not fit the table: column 'seq' is missing; "
        'column \'session\' is "string" in the table but "long" in the batch; '
        "new column 'extra' must be nullable"
    )


def test_a_schema_mismatch_is_a_value_error_exiting_1() -> None:
    assert issubclass(SchemaMismatch, ValueError) and issubclass(SchemaMismatch, StompLakeError)
    assert SchemaMismatch("x").exit_code == 1
