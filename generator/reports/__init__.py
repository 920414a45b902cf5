"""What commands report: JUnit XML and JSON, Markdown summaries, and the HTML page with its charts.

- :mod:`~generator.reports.junit`: a smoke report as JUnit XML and JSON;
- :mod:`~generator.reports.markdown`, :mod:`~generator.reports.summaries`: ``--summary-md`` sections and each
  command's result as one (and the diff as a Markdown document);
- :mod:`~generator.reports.html_page`, :mod:`~generator.reports.charts`, :mod:`~generator.reports.ensemble_svg`:
  ``gen-repo report``'s page, its SVG charts and ensemble pictures.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
