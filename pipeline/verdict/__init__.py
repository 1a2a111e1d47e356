"""verdict stage."""
