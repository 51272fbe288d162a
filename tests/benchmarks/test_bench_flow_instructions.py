from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.bench_flow_instructions import COMPONENTS, SHA256, markdown, split

ROOT = Path(__file__).resolve().parents[2]

ANNOTATED = """\
--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
1,000,000 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir                     file:function
--------------------------------------------------------------------------------
  900,000 (90.00%)  pipeline/spark/_packet_loop.c:__pyx_pw_8pipeline_5spark_12_packet_loop_1feed_packets [/x/_packet_loop.so]
  600,000 (60.00%)  build/cython/pipeline/session/model.c:__pyx_pw_8pipeline_7session_5model_12SessionModel_31_process [/x/model.so]
  500,000 (50.00%)  build/cython/pipeline/session/model.c:__pyx_pw_8pipeline_7session_5model_12SessionModel_31_process'2 [/x/model.so]
  100,000 (10.00%)  build/cython/pipeline/stomp/decoder.c:__pyx_pw_8pipeline_5stomp_7decoder_7Decoder_13events [/x/decoder.so]
   20,000 ( 2.00%)  build/cython/pipeline/stomp/decoder.c:__pyx_pw_8pipeline_5stomp_7decoder_7Decoder_11next_event [/x/decoder.so]
  301,000 (30.10%)  ???:0x0000000000006850 [/usr/lib/python3.11/lib-dynload/_hashlib.cpython-311-x86_64-linux-gnu.so]
  280,000 (28.00%)  ???:EVP_DigestUpdate [/usr/lib/x86_64-linux-gnu/libcrypto.so.3]
  280,000 (28.00%)  crypto/evp/digest.c:EVP_DigestUpdate
   20,000 ( 2.00%)  ???:EVP_DigestFinal_ex [/usr/lib/x86_64-linux-gnu/libcrypto.so.3]
   50,000 ( 5.00%)  ???:parquet::arrow::FileWriterImpl::WriteTable(arrow::Table const&, long) [/x/libparquet.so]
"""  # noqa: E501 - callgrind_annotate's lines as it prints them


def test_components_are_each_functions_largest_inclusive_count() -> None:
    found = split(ANNOTATED)
    assert found["total"] == 1_000_000
    components = found["components"]
    assert set(components) == set(COMPONENTS)
    assert components["packet loop, all of reassembly, decoding and the model"] == 900_000
    assert components["session model (frames, heart-beats, rows)"] == 600_000  # not + recursion
    assert components["  of which STOMP decoding"] == 120_000  # events + next_event
    assert components[SHA256] == 300_000  # update (shown twice: counted once) and final
    assert components["Parquet written"] == 50_000
    assert components["rows converted to Arrow"] == 0


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_benchmark_counts_both_ways_on_the_same_frames_and_writes_both_reports(
    tmp_path: Path,
) -> None:
    command = [sys.executable, "-m", "benchmarks.bench_flow_instructions", "--out", str(tmp_path)]
    command += ["--data", str(tmp_path / "data"), "--mb", "0.3", "--shape", "small"]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, timeout=600)
    result = json.loads((tmp_path / "flow_instructions-small.json").read_text())
    assert result["frames"] > 0  # the run refuses ways that wrote different frame counts
    compiled, pure = result["instructions"]["compiled"], result["instructions"]["pure_python"]
    assert 0 < compiled < pure
    components = result["components"]
    loop = components["packet loop, all of reassembly, decoding and the model"]
    assert 0 < components["session model (frames, heart-beats, rows)"] < loop < compiled
    assert components["Parquet written"] > 0 and components["rows converted to Arrow"] > 0
    report = (tmp_path / "flow_instructions-small.md").read_text()
    assert "(small shape)" in report
    assert "| Parquet written |" in report


def test_a_baseline_is_reported_beside_this_checkouts_count() -> None:
    components = dict.fromkeys(COMPONENTS, 1_000)
    result = {
        "shape": "small",
        "capture_bytes": 2_000_000,
        "connections": 1,
        "packets": 100,
        "frames": 10,
        "instructions": {"compiled": 900, "pure_python": 2_000, "baseline": 1_000},
        "components": components,
        "compiled_per_frame_without_sha256": 90,
        "pure_python_vs_compiled": 2.22,
        "baseline": {
            "checkout": "/tmp/before",
            "commit": "abc1234",
            "components": dict.fromkeys(COMPONENTS, 2_000),
            "compiled_vs_baseline": 0.9,
        },
    }
    report = markdown(result)
    assert "Baseline: the compiled way of /tmp/before at abc1234" in report
    assert "this checkout's is 90.00% of it" in report
    assert "| Parquet written | 200 | 100 |" in report
