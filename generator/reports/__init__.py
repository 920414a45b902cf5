"""What commands report: JUnit XML and JSON, Markdown summaries, and the HTML page with its charts.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
