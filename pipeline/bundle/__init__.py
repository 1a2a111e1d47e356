"""bundle stage."""
