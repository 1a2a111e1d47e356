"""runs stage."""
