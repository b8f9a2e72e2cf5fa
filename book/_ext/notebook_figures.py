"""A numbered, captioned figure whose image is glued in a notebook of the book.

myst-nb's ``glue:figure`` only pastes keys glued in the *same* document, and its
cross-document ``glue`` directive (``:doc:``) gives a bare image with no caption,
no label and no alt text.  A chapter page that shows its notebooks' figures
needs all three, and the notebook must stay the single source of the image:

.. code-block:: markdown

    ```{notebook-figure} ch1-saturation
    :doc: ../notebooks/01b_scaling.ipynb
    :name: fig-ch1-saturation
    :alt: Three panels against the width ...

    The caption.
    ```

The directive builds a ``figure`` node at read time (so ``numfig`` numbers it
and ``{numref}`` finds it) around myst-nb's pending cross-document glue
reference, which myst-nb's own post-transform replaces by the image once every
notebook has been read.  A later post-transform copies ``:alt:`` onto that image.
A missing key or notebook is a build warning, hence an error under ``-W``.
"""

from __future__ import annotations

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective

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


def setup(app):
    app.add_directive("notebook-figure", NotebookFigure)
    app.add_post_transform(NotebookFigureAlt)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
