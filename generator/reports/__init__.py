"""What commands report: JUnit XML, Markdown summaries, the HTML page and its charts."""
