"""Sphinx extension used only by scripts/build_pdf.py (the single-page HTML build).

Several extensions of the book (sphinx-proof, sphinx-exercise, sphinx-jupyterbook-latex)
register how to render their nodes for the builder named `html` only; the `singlehtml`
builder writes the same HTML, so it gets the same renderers (where it has none of its own).
"""


def copy_html_renderers(app):
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    single = handlers.setdefault("singlehtml", {})
    for node_name, pair in handlers.get("html", {}).items():
        single.setdefault(node_name, pair)


def setup(app):
    app.connect("builder-inited", copy_html_renderers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
