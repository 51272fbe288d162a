"""Start-up tuning: what exists only to make a run start sooner, nothing in the data path.

The JVM's class archive (`class_archive`) and the lean Spark home it is made on (`lean_home`),
Spark's Python worker daemon for local sessions (`worker_daemon`), the JVM's output forwarded
so it never holds the caller's (`jvm_output`), and Great Expectations imported on a thread
(`preload`) with the modules no suite uses deferred (`deferred`) and its Data Docs templates
compiled once per install (`templates`). Without any of them a run gives the same tables, only
later. The folders they keep things in are `pipeline.paths`'.
"""
