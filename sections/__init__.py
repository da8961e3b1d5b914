"""The tutorial's lessons: one module per section (`sNN_<slug>.py`), the registry that
finds and runs them, and the parts several lessons share."""
