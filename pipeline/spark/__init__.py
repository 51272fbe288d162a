"""Spark side of the pipeline: session set-up and the jobs (functions from DataFrames to DataFrames)."""
