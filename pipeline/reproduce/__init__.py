"""reproduce stage."""
