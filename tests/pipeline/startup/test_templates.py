"""GX's Data Docs templates compiled once per install (`pipeline.startup.templates`)."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pytest
from jinja2.bccache import bc_magic

from pipeline.startup.templates import KeptTemplates, keep_compiled_templates
from tests.support.scripts import run_script

TEMPLATE = "{% for n in items %}<li>{{ n | upper }}</li>{% endfor %}"


def _environment(kept: KeptTemplates) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.DictLoader({"list.html": TEMPLATE}), bytecode_cache=kept
    )


def _compiled_with(kept: KeptTemplates, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The templates a fresh environment over ``kept`` compiled from source to render."""
    compiled: list[str] = []
    compile_source = jinja2.Environment.compile

    def counting(
        env: jinja2.Environment, source: str, name: str | None = None, *a: object, **k: object
    ) -> object:
        compiled.append(str(name))
        return compile_source(env, source, name, *a, **k)  # type: ignore[call-overload]

    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    html = _environment(kept).get_template("list.html").render(items=["a", "b"])
    assert html == "<li>A</li><li>B</li>"
    return compiled


def test_a_template_is_compiled_once_then_read_from_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _compiled_with(KeptTemplates(tmp_path), monkeypatch) == ["list.html"]
    assert [p.suffix for p in tmp_path.iterdir()] == [".cache"]
    assert _compiled_with(KeptTemplates(tmp_path), monkeypatch) == []  # another process's cache


def test_a_damaged_file_is_compiled_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _compiled_with(KeptTemplates(tmp_path), monkeypatch)
    for path in tmp_path.iterdir():
        path.write_bytes(path.read_bytes()[: len(bc_magic) + 3])  # cut inside its checksum
    assert _compiled_with(KeptTemplates(tmp_path), monkeypatch) == ["list.html"]


def test_a_folder_that_cannot_be_written_costs_only_the_compilation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "not-made" / "templates"  # no folder: every write fails
    kept = KeptTemplates(missing)
    assert _compiled_with(kept, monkeypatch) == ["list.html"]
    assert _compiled_with(kept, monkeypatch) == []  # kept in memory
    assert not missing.exists()


GX_VIEWS = """
import json, sys
from pathlib import Path
from pipeline.startup.templates import keep_compiled_templates
kept = keep_compiled_templates(Path(sys.argv[1]))
from great_expectations.render.view.view import DefaultJinjaPageView
views = [DefaultJinjaPageView(), DefaultJinjaPageView()]
print(json.dumps([
    all(view.env.bytecode_cache is kept for view in views),
    keep_compiled_templates() is kept,
    oct(Path(sys.argv[1]).stat().st_mode & 0o777),
]))
"""


def test_gx_views_keep_their_templates_in_a_private_folder(tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "templates"
    every_view, once, mode = json.loads(run_script(GX_VIEWS, tmp_path, str(folder)))
    assert every_view and once
    assert mode == "0o700"


def test_the_default_folder_is_the_users_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STOMP_LAKE_CLASS_ARCHIVE_DIR", str(tmp_path))
    monkeypatch.setattr("pipeline.startup.templates._kept", None)
    from great_expectations.render.view.view import DefaultJinjaView

    monkeypatch.setattr(DefaultJinjaView, "__init__", DefaultJinjaView.__init__)
    kept = keep_compiled_templates()
    assert Path(kept.directory) == tmp_path / "jinja-templates"
