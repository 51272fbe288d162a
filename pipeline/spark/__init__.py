"""Spark side of the pipeline: session set-up and jobs (functions from DataFrames to DataFrames)."""
