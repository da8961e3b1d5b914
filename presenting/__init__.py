"""Ways to present the tutorial and a run's results, apart from the lessons themselves: the
notebook export (notebook.py), the figures (plots.py), and the results as pages to read, a
static HTML site or Markdown (site.py). What they read from a section file without
importing it is in source.py. The lessons never import this package."""
