"""The tutorial's lessons, one module per section (`sNN_<slug>.py`), and the experiment's
parts they show (`parts/`). The harness (harness/) finds and runs them."""
