"""Great Expectations as the gate uses it: an ephemeral context whose Data Docs go under
``<lake>/docs/<batch_id>/``, a suite's validation definition run cheaply first and with
details on failure, and the docs built and scrubbed. The engines
(:mod:`pipeline.validation.engine`) add their data sources to the context."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pipeline.lake.layout import Lake, make_private_dir, make_tree_private, private_umask
from pipeline.session.privacy import scrub
from pipeline.startup.templates import keep_compiled_templates

if TYPE_CHECKING:
    from great_expectations.data_context.store.store import DataDocsSiteConfigTypedDict

DOCS_SITE = "local_site"
SAMPLE_ROWS = 5
INDEX_COLUMNS = ("session_id", "frame_index")  # name the rows of a failed expectation
DOCS_TEXT_SUFFIXES = (".html", ".json", ".js", ".txt", ".md")


def new_context(lake: Lake, batch_id: str) -> Any:
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    keep_compiled_templates()  # of the data docs: compiled once per install
    context = gx.get_context(mode="ephemeral")
    # GX documents an ephemeral context's configuration as not saved, yet it writes the whole
    # of it as YAML into its in-memory store at each data source, asset and suite added (33
    # times a batch, each longer than the last: 0.27 s of the 0.86 s set-up on 0.58 GB). Nothing
    # reads that copy back: the context keeps its configuration as objects.
    context._save_project_config = lambda: None  # type: ignore[method-assign]
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    docs = make_private_dir(lake.docs_dir / batch_id)
    sites = context.variables.data_docs_sites
    assert sites is not None  # an ephemeral context is made with the default local site
    site = cast("DataDocsSiteConfigTypedDict", dict(sites[DOCS_SITE]))
    site["store_backend"] = {
        "class_name": "TupleFilesystemStoreBackend",
        "base_directory": str(docs),
    }
    context.update_data_docs_site(DOCS_SITE, site)
    return context


def add_definition(context: Any, name: str, data: Any, suite: Any) -> Any:
    """The validation definition of ``suite`` (a GX suite object) over the batch definition
    ``data``."""
    import great_expectations as gx

    added = context.suites.add(suite)
    return context.validation_definitions.add(
        gx.ValidationDefinition(name=name, data=data, suite=added)
    )


def run_definition(
    definition: Any,
    batch_parameters: dict[str, Any] | None,
    columns: list[str],
    batch_id: str,
    *,
    detailed: bool,
) -> Any:
    """The validation result; ``detailed``: with sample values and the rows' index columns."""
    from great_expectations.core.run_identifier import RunIdentifier

    result_format: dict[str, Any] = {"result_format": "BOOLEAN_ONLY"}
    if detailed:
        result_format = {"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_ROWS}
        keys = [k for k in INDEX_COLUMNS if k in columns]
        if keys:
            result_format["unexpected_index_column_names"] = keys
    return definition.run(
        batch_parameters=batch_parameters,
        result_format=result_format,
        run_id=RunIdentifier(run_name=batch_id),
    )


def build_docs(context: Any, lake: Lake, batch_id: str) -> Path:
    """The batch's Data Docs, scrubbed; their index page."""
    with private_umask():
        context.build_data_docs(site_names=[DOCS_SITE])
    scrub_docs(lake.docs_dir / batch_id)
    return lake.docs_dir / batch_id / "index.html"


def scrub_docs(folder: Path) -> None:
    """Data Docs as GX rendered them, with passcodes spelled out in them masked and private
    modes (the tables are masked already: this is for values that reach GX some other way)."""
    for path in folder.rglob("*"):
        if path.is_file() and path.suffix in DOCS_TEXT_SUFFIXES:
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
            clean = scrub(text)
            if clean != text:
                path.write_text(clean, encoding="utf-8", errors="surrogateescape")
    make_tree_private(folder)
