"""A numbered, captioned figure whose image is glued in a notebook of the book.

myst-nb's ``glue:figure`` only pastes keys glued in the *same* document, and its
cross-document ``glue`` directive (``:doc:``) gives a bare image with no caption,
no label and no alt text.  A chapter page that shows its notebooks' figures
needs all three, and the notebook must stay the single source of the image:

.. code-block:: markdown

    ```{notebook-figure} ch1-saturation
    :doc: ../notebooks/01c_scaling.ipynb
    :name: fig-ch1-saturation
    :alt: Three panels against the width ...

    The caption.
    ```

The directive builds a ``figure`` node at read time (so ``numfig`` numbers it
and ``{numref}`` finds it) around myst-nb's pending cross-document glue
reference, which myst-nb's own post-transform replaces by the image once every
notebook has been read.  A later post-transform copies ``:alt:`` onto that image
and writes the image file itself: myst-nb points the image at
``_images/<sha256>.png`` but writes that file only when some page displays the
output, and a figure glued with ``display=False`` is displayed nowhere else.
A missing key or notebook is a build warning, hence an error under ``-W``.
"""

from __future__ import annotations

from binascii import a2b_base64
import hashlib
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective

from myst_nb.ext.glue.crossref import read_glue_cache
from myst_nb.ext.glue.utils import PendingGlueReferenceError, create_pending_glue_ref


class NotebookFigure(SphinxDirective):
    required_arguments = 1  # the glue key
    has_content = True  # the caption
    option_spec = {
        "doc": directives.unchanged_required,
        "name": directives.unchanged,
        "alt": directives.unchanged,
        "width": directives.unchanged,
    }

    def run(self):
        key = self.arguments[0]
        if "doc" not in self.options:
            raise self.error("notebook-figure needs :doc: (the notebook that glues the key)")
        if "alt" not in self.options:
            raise self.error(f"notebook-figure {key!r} needs :alt: (a text for readers who cannot see it)")
        try:
            ref = create_pending_glue_ref(
                self.state.document, self.state.document.current_source, self.lineno, self.options["doc"], key
            )
        except PendingGlueReferenceError as exc:
            raise self.error(str(exc)) from exc
        figure = nodes.figure("", ref, classes=["notebook-figure"])
        figure["notebook_figure_alt"] = self.options["alt"]
        figure["notebook_figure_source"] = (ref.refdoc, key)
        if "width" in self.options:
            figure["notebook_figure_width"] = self.options["width"]
        if self.content:
            parsed = nodes.Element()
            self.state.nested_parse(self.content, self.content_offset, parsed)
            first = parsed[0]
            if isinstance(first, nodes.paragraph):
                caption = nodes.caption(first.rawsource, "", *first.children)
                caption.source, caption.line = first.source, first.line
                figure += caption
                figure += parsed[1:]
            else:
                figure += parsed.children
        self.add_name(figure)
        return [figure]


class NotebookFigureAlt(SphinxPostTransform):
    """Give the pasted image the figure's alt text (runs after myst-nb's glue post-transform, priority 5)."""

    default_priority = 6

    def run(self, **kwargs):
        for figure in self.document.findall(nodes.figure):
            alt = figure.get("notebook_figure_alt")
            if alt is None:
                continue
            images = list(figure.findall(nodes.image))
            if not images:
                continue  # myst-nb has already warned that the key was not found
            for image in images:
                image["alt"] = alt
                if "notebook_figure_width" in figure:
                    image["width"] = figure["notebook_figure_width"]
            self.write_image(*figure["notebook_figure_source"])

    def write_image(self, refdoc, key):
        """Write the glued PNG where myst-nb's image node points (``_images/<sha256>.png``)."""
        if not hasattr(self.app.builder, "imagedir"):
            return
        output = read_glue_cache(self.env.mystnb_config.output_folder, refdoc).get(key, {})
        data = output.get("data", {}).get("image/png")
        if data is None:
            return
        raw = a2b_base64(data)
        path = Path(self.app.builder.outdir) / self.app.builder.imagedir / f"{hashlib.sha256(raw).hexdigest()}.png"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(raw)


def setup(app):
    app.add_directive("notebook-figure", NotebookFigure)
    app.add_post_transform(NotebookFigureAlt)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
