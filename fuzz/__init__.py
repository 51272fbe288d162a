"""Fuzz targets for the decoder, the capture readers and reassembly (see fuzz/README.md)."""
